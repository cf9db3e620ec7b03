#pragma once
/// @file
/// A child process with its standard output on a pipe: spawn, read lines
/// with a timeout, signal, wait with a timeout. For multi-process tests and
/// benchmarks that run a peer of their own (POSIX only).

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace tessera {

/// How to start a child.
struct child_options {
  /// Extra "NAME=value" entries added to (or replacing in) this process's
  /// environment. Default: none.
  std::vector<std::string> env;
  /// Pipe the child's stdout to read_line(); else it inherits ours.
  /// Default: true.
  bool capture_stdout = true;
};

/// A running (or exited) child process. Move-only; the destructor kills
/// (SIGKILL) and reaps a child that is still running. Not thread-safe.
class child_process {
public:
  /// Starts `program` (a path; not searched in PATH) with `args` (argv[1..]).
  /// Errors (caf::sec::runtime_error) name the program and the failing call.
  [[nodiscard]] static caf::expected<child_process>
  spawn(const std::string& program, const std::vector<std::string>& args, child_options opts = {});

  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process();

  [[nodiscard]] pid_t pid() const { return pid_; }

  /// The next line of the child's stdout, without its '\n'. Errors: the
  /// child closed stdout (exited) or no full line came within `timeout`.
  [[nodiscard]] caf::expected<std::string> read_line(std::chrono::milliseconds timeout);

  /// Sends `sig` to the child (no-op once it was reaped).
  void kill(int sig = SIGKILL);

  /// Waits until the child exits: its exit code, or 128 + the signal that
  /// ended it. Error if it is still running after `timeout`.
  [[nodiscard]] caf::expected<int> wait(std::chrono::milliseconds timeout);

  /// True until wait() reaped the child.
  [[nodiscard]] bool running() const { return pid_ > 0 && !exit_code_; }

private:
  child_process() = default;
  void reset();
  void close_fds();

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int pid_fd_ = -1;
  std::string buffer_;
  bool exit_code_ = false;
  int status_ = 0;
};

} // namespace tessera
