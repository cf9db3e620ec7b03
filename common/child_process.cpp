#include "common/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include <caf/sec.hpp>

extern char** environ;

namespace tessera {
namespace {

caf::error child_error(const std::string& what) {
  return caf::make_error(caf::sec::runtime_error, what);
}

caf::error errno_error(const std::string& what) {
  return child_error(what + ": " + std::strerror(errno));
}

// Milliseconds left until `deadline`, at least 0.
int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// This process's environment with `extra` added or replacing entries.
std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  auto put = [&](const std::string& entry) {
    auto name = entry.substr(0, entry.find('='));
    if (!vars.contains(name))
      order.push_back(name);
    vars[name] = entry;
  };
  for (char** e = environ; *e != nullptr; ++e)
    put(*e);
  for (const auto& e : extra)
    put(e);
  std::vector<std::string> out;
  out.reserve(order.size());
  for (const auto& name : order)
    out.push_back(vars[name]);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

} // namespace

caf::expected<child_process> child_process::spawn(const std::string& program,
                                                  const std::vector<std::string>& args,
                                                  child_options opts) {
  int pipe_fds[2] = {-1, -1};
  if (opts.capture_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return errno_error("spawn " + program + ": pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (opts.capture_stdout)
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  std::vector<std::string> argv_strings{program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  auto env_strings = merged_environment(opts.env);
  auto argv = c_strings(argv_strings);
  auto envp = c_strings(env_strings);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (opts.capture_stdout)
    ::close(pipe_fds[1]);
  if (rc != 0) {
    if (opts.capture_stdout)
      ::close(pipe_fds[0]);
    return child_error("spawn " + program + ": " + std::strerror(rc));
  }
  child_process child;
  child.pid_ = pid;
  child.stdout_fd_ = pipe_fds[0];
  child.pid_fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  return child;
}

child_process::child_process(child_process&& other) noexcept { *this = std::move(other); }

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    reset();
    pid_ = std::exchange(other.pid_, -1);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    pid_fd_ = std::exchange(other.pid_fd_, -1);
    buffer_ = std::move(other.buffer_);
    exit_code_ = std::exchange(other.exit_code_, false);
    status_ = other.status_;
  }
  return *this;
}

child_process::~child_process() { reset(); }

void child_process::reset() {
  if (running()) {
    kill(SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  close_fds();
  pid_ = -1;
  exit_code_ = false;
  buffer_.clear();
}

void child_process::close_fds() {
  if (stdout_fd_ >= 0)
    ::close(stdout_fd_);
  if (pid_fd_ >= 0)
    ::close(pid_fd_);
  stdout_fd_ = pid_fd_ = -1;
}

caf::expected<std::string> child_process::read_line(std::chrono::milliseconds timeout) {
  if (stdout_fd_ < 0)
    return child_error("read_line: the child's stdout is not captured");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      auto line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    pollfd pfd{stdout_fd_, POLLIN, 0};
    int n = ::poll(&pfd, 1, remaining_ms(deadline));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno_error("read_line: poll");
    if (n == 0)
      return child_error("read_line: no line from child " + std::to_string(pid_) + " within "
                         + std::to_string(timeout.count()) + " ms");
    char buf[4096];
    auto got = ::read(stdout_fd_, buf, sizeof(buf));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return child_error("read_line: child " + std::to_string(pid_) + " closed its stdout");
    buffer_.append(buf, static_cast<size_t>(got));
  }
}

void child_process::kill(int sig) {
  if (running())
    ::kill(pid_, sig);
}

caf::expected<int> child_process::wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0)
    return child_error("wait: no child");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exit_code_) {
    int status = 0;
    auto r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = true;
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (r < 0 && errno != EINTR)
      return errno_error("wait for child " + std::to_string(pid_));
    int left = remaining_ms(deadline);
    if (left == 0)
      return child_error("wait: child " + std::to_string(pid_) + " still running after "
                         + std::to_string(timeout.count()) + " ms");
    if (pid_fd_ >= 0) {
      pollfd pfd{pid_fd_, POLLIN, 0};
      ::poll(&pfd, 1, left);
    } else {
      ::usleep(1000); // no pidfd (old kernel): poll waitpid
    }
  }
  return status_;
}

} // namespace tessera
