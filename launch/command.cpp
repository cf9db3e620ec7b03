#include "launch/command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <caf/error.hpp>
#include <caf/sec.hpp>

#include "common/error.hpp"
#include "common/text_tail.hpp"

namespace tessera::launch {

namespace {

caf::error failed(const std::string& what) {
  return caf::make_error(caf::sec::runtime_error, what);
}

} // namespace

std::string shell_quote(std::string_view s) {
  const bool bare = !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                      "0123456789-_./=:,@+%") == std::string_view::npos;
  if (bare)
    return std::string{s};
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv)
    out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

caf::expected<command_result> run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  if (argv.empty())
    return failed("run_command: no command");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return failed(std::string{"pipe: "} + std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return failed(std::string{"fork: "} + std::strerror(errno));
  }
  if (pid == 0) {
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0)
      dup2(null, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    execvp(args[0], args.data());
    const std::string msg = "cannot run " + argv[0] + ": " + std::strerror(errno) + "\n";
    (void)!write(2, msg.data(), msg.size());
    _exit(127);
  }
  close(fds[1]);
  command_result out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (out.output.size() < (4u << 20))
      out.output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out)
    kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return failed(command_text(argv) + " did not finish within " + std::to_string(timeout.count() / 1000) +
                  " s (killed); it printed:\n" + tail_lines(out.output, 20));
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

caf::expected<command_result> runner::run(const std::vector<std::string>& argv,
                                          std::chrono::milliseconds timeout) const {
  if (dry_) {
    *out_ << "+ " << command_text(argv) << "\n";
    return command_result{0, {}};
  }
  return run_command(argv, timeout);
}

caf::expected<command_result> runner::must(const std::string& what, const std::vector<std::string>& argv,
                                           std::chrono::milliseconds timeout) const {
  auto r = run(argv, timeout);
  if (!r)
    return failed(what + ": " + error_message(r.error()));
  if (r->exit_code != 0)
    return failed(what + " failed (exit " + std::to_string(r->exit_code) + "): " + command_text(argv) + "\n" +
                  tail_lines(r->output, 20));
  return r;
}

caf::error write_text_file(const std::filesystem::path& file, const std::string& text, std::filesystem::perms mode) {
  const auto tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return failed("cannot write " + tmp);
    out << text;
    if (!out.flush())
      return failed("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::permissions(tmp, mode, std::filesystem::perm_options::replace, ec);
  if (!ec)
    std::filesystem::rename(tmp, file, ec);
  if (ec)
    return failed("cannot write " + file.string() + ": " + ec.message());
  return {};
}

} // namespace tessera::launch
