#pragma once
/// @file
/// What the real ssh and Slurm launch tests share: ports, files, a tiny
/// model from `tessera model init`, shell commands, waiting, and the
/// launched nodes' processes.

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "launch/command.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"

namespace tessera::test::launch_harness {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline std::string read(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Whether 127.0.0.1:`port` can be bound now.
inline bool port_free(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  auto addr = loopback_address(port);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

/// A port p such that p .. p + n - 1 were all free a moment ago.
inline uint16_t free_ports(int n) {
  for (int tries = 0; tries < 100; ++tries) {
    const uint16_t p = free_port();
    if (p < 1024 || p > 65000)
      continue;
    bool all = true;
    for (int i = 1; i < n && all; ++i)
      all = port_free(static_cast<uint16_t>(p + i));
    if (all)
      return p;
  }
  return 0;
}

/// `sh -c cmd`: its exit code and output.
inline launch::command_result shell(const std::string& cmd, std::chrono::milliseconds timeout = 60s) {
  auto r = launch::run_command({"/bin/sh", "-c", cmd}, timeout);
  if (!r)
    return {-1, error_text(r.error())};
  return *r;
}

inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (done())
      return true;
    std::this_thread::sleep_for(100ms);
  }
  return done();
}

/// Whether process `pid` runs (a zombie does not).
inline bool pid_alive(const std::string& pid) {
  const auto stat = read("/proc/" + pid + "/stat");
  if (stat.empty())
    return false;
  const auto close_paren = stat.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < stat.size() && stat[close_paren + 2] != 'Z';
}

/// Pids of running `tessera node` processes (not the srun or shell that
/// started one) whose command line holds `needle`.
inline std::vector<std::string> node_pids(const std::string& needle) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    auto cmd = read(e.path() / "cmdline");
    const auto first = cmd.find('\0');
    if (first == std::string::npos || !cmd.substr(0, first).ends_with("tessera") ||
        cmd.compare(first + 1, 5, std::string{"node\0", 5}) != 0)
      continue;
    for (auto& c : cmd)
      if (c == '\0')
        c = ' ';
    if (cmd.find(needle) != std::string::npos && pid_alive(name))
      out.push_back(name);
  }
  return out;
}

/// A tiny random-weight model (`tessera model init --shape tiny`) in `dir`.
inline void make_tiny_model(const fs::path& dir) {
  auto r = run_tessera("model init --shape tiny --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
}

/// A cluster secret, mode 600.
inline void make_secret(const fs::path& file) {
  std::ofstream(file) << "launch-test-cluster-secret-0123456789abcdef\n";
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
}

} // namespace tessera::test::launch_harness
