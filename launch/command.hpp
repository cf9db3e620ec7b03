#pragma once
/// @file
/// The commands a launcher runs (ssh, scp, sbatch, squeue, scancel): run
/// with a timeout and their output captured, or, in a dry run, printed as
/// shell text and not run.

#include <chrono>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::launch {

/// What a command printed (stdout and stderr together) and how it ended.
struct command_result {
  /// The exit code, or 128 + the signal that ended it.
  int exit_code = -1;
  std::string output;
};

/// `s` as one shell word: bare when it holds only safe characters
/// (letters, digits, and -_./=:,@+%), else in single quotes.
[[nodiscard]] std::string shell_quote(std::string_view s);

/// `argv` as a shell command line.
[[nodiscard]] std::string command_text(const std::vector<std::string>& argv);

/// Runs `argv` (argv[0] looked up in PATH) with stdin from /dev/null and
/// waits at most `timeout` (then kills it). Errors
/// (caf::sec::runtime_error): it could not start, or it timed out (with
/// what it printed so far).
[[nodiscard]] caf::expected<command_result> run_command(const std::vector<std::string>& argv,
                                                        std::chrono::milliseconds timeout);

/// Runs commands or, in a dry run, prints each ("+ <command>") instead.
class runner {
public:
  runner(bool dry_run, std::ostream& out) : dry_(dry_run), out_(&out) {}

  [[nodiscard]] bool dry() const { return dry_; }
  [[nodiscard]] std::ostream& out() const { return *out_; }

  /// run_command, or (dry) print it and answer exit 0 with no output.
  [[nodiscard]] caf::expected<command_result> run(const std::vector<std::string>& argv,
                                                  std::chrono::milliseconds timeout) const;

  /// run(), with an exit code other than 0 an error naming `what` and
  /// holding the command's output.
  [[nodiscard]] caf::expected<command_result> must(const std::string& what, const std::vector<std::string>& argv,
                                                   std::chrono::milliseconds timeout) const;

private:
  bool dry_;
  std::ostream* out_;
};

/// Writes `text` to `file` with `mode` (0600 for secrets), replacing it.
[[nodiscard]] caf::error write_text_file(const std::filesystem::path& file, const std::string& text,
                                         std::filesystem::perms mode);

} // namespace tessera::launch
