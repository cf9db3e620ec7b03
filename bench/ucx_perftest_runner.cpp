#include "bench/ucx_perftest_runner.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <caf/sec.hpp>

#include "common/child_process.hpp"
#include "common/error.hpp"

namespace tessera::bench {

namespace {

caf::error perftest_error(const std::string& what) {
  return caf::make_error(caf::sec::runtime_error, "ucx_perftest: " + what);
}

// A port nobody listens on right now (the kernel's pick for port 0). Another
// process may take it before ucx_perftest binds it; run_perftest retries.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 0;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0
      && ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  ::close(fd);
  return port;
}

// True when some socket listens on TCP `port` (IPv4 or IPv6), from
// /proc/net/tcp{,6}: ucx_perftest announces nothing we could read in time
// (its stdout is block-buffered into our pipe), and connecting to test it
// would be taken for the client.
bool port_listening(int port) {
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in{file};
    std::string line;
    std::getline(in, line); // header
    while (std::getline(in, line)) {
      std::istringstream row{line};
      std::string slot, local, remote, state;
      if (!(row >> slot >> local >> remote >> state))
        continue;
      auto colon = local.rfind(':');
      if (colon != std::string::npos && state == "0A"
          && std::stoi(local.substr(colon + 1), nullptr, 16) == port)
        return true;
    }
  }
  return false;
}

std::vector<std::string> client_args(const perftest_spec& s, int port) {
  std::vector<std::string> args{"127.0.0.1", "-p", port > 0 ? std::to_string(port) : "PORT",
                                "-t", s.test, "-s", std::to_string(s.size_bytes),
                                "-n", std::to_string(s.iterations), "-w", std::to_string(s.warmup)};
  if (s.error_handling)
    args.push_back("-e");
  return args;
}

std::vector<std::string> server_args(const perftest_spec& s, int port) {
  std::vector<std::string> args{"-p", std::to_string(port)};
  if (s.error_handling)
    args.push_back("-e");
  return args;
}

// Runs `program args...` through /bin/sh so its stderr lands in the same
// pipe as its stdout (error texts are then part of what we report).
caf::expected<child_process> spawn_merged(const std::string& program,
                                          const std::vector<std::string>& args,
                                          const perftest_spec& spec) {
  std::vector<std::string> sh_args{"-c", "exec \"$0\" \"$@\" 2>&1", program};
  sh_args.insert(sh_args.end(), args.begin(), args.end());
  child_options opts;
  if (!spec.tls.empty())
    opts.env.push_back("UCX_TLS=" + spec.tls);
  opts.env.insert(opts.env.end(), spec.env.begin(), spec.env.end());
  return child_process::spawn("/bin/sh", sh_args, opts);
}

std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds{0});
}

} // namespace

caf::expected<perftest_result> parse_perftest_output(std::string_view out) {
  size_t at = std::string_view::npos;
  for (size_t pos = out.find("Final:"); pos != std::string_view::npos; pos = out.find("Final:", pos + 1))
    if (pos == 0 || out[pos - 1] == '\n')
      at = pos;
  if (at == std::string_view::npos)
    return perftest_error("no 'Final:' row in its output");
  auto end = out.find('\n', at);
  std::string row{out.substr(at + 6, end == std::string_view::npos ? end : end - at - 6)};
  // strtod, not operator>>: a column can read "inf" (a rate over no time).
  std::istringstream in{row};
  double v[8];
  for (double& x : v) {
    std::string word;
    char* end = nullptr;
    if (!(in >> word) || (x = std::strtod(word.c_str(), &end), *end != '\0'))
      return perftest_error("'Final:' row does not hold eight numbers: '" + row + "'");
  }
  perftest_result r;
  r.iterations = static_cast<uint64_t>(v[0]);
  r.latency_us_p50 = v[1];
  r.latency_us_avg = v[3];
  r.bandwidth_mib_s = v[5];
  r.msgs_per_s = v[7];
  return r;
}

std::string perftest_client_command(const perftest_spec& spec, int port) {
  std::string cmd = spec.tls.empty() ? "" : "UCX_TLS=" + spec.tls + " ";
  for (const auto& e : spec.env)
    cmd += e + " ";
  cmd += "ucx_perftest";
  for (const auto& a : client_args(spec, port))
    cmd += " " + a;
  return cmd;
}

std::string find_ucx_perftest() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs{path ? path : "/usr/bin:/bin"};
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    auto p = std::filesystem::path{dir.empty() ? "." : dir} / "ucx_perftest";
    if (::access(p.c_str(), X_OK) == 0)
      return p.string();
  }
  return {};
}

caf::expected<perftest_result> run_perftest(const std::string& program, const perftest_spec& spec) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + spec.timeout;
  std::string last_error = "no attempt";
  // A server that could not bind its port exits at once; try another port.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int port = free_port();
    auto server = spawn_merged(program, server_args(spec, port), spec);
    if (!server)
      return perftest_error("starting the server: " + error_text(server.error()));
    bool listening = false;
    while (!(listening = port_listening(port)) && left_until(deadline).count() > 0) {
      if (server->wait(std::chrono::milliseconds{0}))
        break; // exited: the port was taken, or it failed
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    }
    if (!listening) {
      std::string out;
      while (auto line = server->read_line(std::chrono::milliseconds{100}))
        out += " | " + *line;
      last_error = "server on port " + std::to_string(port) + " did not listen" + out;
      continue;
    }
    auto client = spawn_merged(program, client_args(spec, port), spec);
    if (!client)
      return perftest_error("starting the client: " + error_text(client.error()));
    std::string out;
    std::deque<std::string> tail;
    while (true) {
      auto line = client->read_line(left_until(deadline));
      if (!line)
        break;
      out += *line + "\n";
      tail.push_back(*line);
      if (tail.size() > 4)
        tail.pop_front();
    }
    auto code = client->wait(std::max(left_until(deadline), std::chrono::milliseconds{100}));
    if (!code) {
      client->kill();
      server->kill();
      return perftest_error(perftest_client_command(spec, port) + ": timed out after "
                            + std::to_string(spec.timeout.count()) + " ms");
    }
    // The server exits after its one test; don't let a stuck one linger.
    if (!server->wait(2s))
      server->kill();
    if (*code != 0) {
      std::string text;
      for (const auto& l : tail)
        text += " | " + l;
      return perftest_error(perftest_client_command(spec, port) + ": exit code "
                            + std::to_string(*code) + text);
    }
    return parse_perftest_output(out);
  }
  return perftest_error(last_error);
}

} // namespace tessera::bench
