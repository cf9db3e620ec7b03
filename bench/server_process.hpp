#pragma once
/// @file
/// The server side of the HTTP load generators (`tessera bench serve`,
/// `tessera bench trace`): start `tessera serve` as a child process on a
/// free port and stop it, wait until a server answers /health, and ask it
/// which model it serves. Blocking calls; the client itself is
/// http_client.hpp.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "bench/http_client.hpp"
#include "common/child_process.hpp"

namespace tessera::bench {

/// Where progress lines go ("starting ...", "the server did not stop ...").
using say_function = std::function<void(const std::string&)>;

/// How to start a server.
struct server_spawn_options {
  /// The tessera binary (the CLI passes /proc/self/exe's target).
  std::string program;
  /// Model folder, passed as --model (empty: the server's built-in demo model).
  std::string model_dir;
  /// Extra arguments of `tessera serve`, e.g. {"--mode", "agg", "--decode", "1"}.
  std::vector<std::string> args;
  /// Longest wait for the "listening on URL" line (writing the demo model on
  /// first use takes a few seconds). Default: 5 minutes.
  std::chrono::milliseconds start_timeout{std::chrono::minutes{5}};
};

/// A `tessera serve` a benchmark started. Move-only; the child is killed
/// (SIGKILL) if it is still running when this is destroyed.
struct spawned_server {
  child_process child;
  /// "http://127.0.0.1:PORT", from the server's "listening on" line.
  std::string url;
  /// The server's line describing its workers ("" if it printed none).
  std::string description;
  /// The command line it was started with, for reports.
  std::string command;
};

/// Starts `program serve --host 127.0.0.1 --port 0 [--model dir] args...`
/// and waits for its "listening on URL" line, then says "server at URL:
/// description". Errors
/// (caf::sec::runtime_error) name the command and say why (spawn failed,
/// the server exited or printed nothing in time).
[[nodiscard]] caf::expected<spawned_server> spawn_server(const server_spawn_options& opts, const say_function& say);

/// How a spawned server stopped.
struct server_stop {
  /// Seconds from SIGTERM until it exited (or was killed).
  double seconds = 0;
  /// Its exit code (a signal's as 128 + N); nullopt when it had to be
  /// killed after 15 s.
  std::optional<int> exit_code;
};

/// Stops `s`: SIGTERM, then SIGKILL if it has not exited within 15 s;
/// says how it stopped.
server_stop stop_server(spawned_server& s, const say_function& say);

/// Waits until GET /health answers 200 (a server still starting answers
/// 503), at most `limit`. A server that cannot be reached fails at once
/// unless `retry_unreachable` (a server just spawned may not accept yet).
[[nodiscard]] caf::error await_health(const http_endpoint& ep, std::chrono::seconds limit, bool retry_unreachable);

/// The id of the first model GET /v1/models lists (`authorization`, when
/// not empty, sent as the Authorization header). Errors name what the
/// server answered instead.
[[nodiscard]] caf::expected<std::string> first_model(const http_endpoint& ep, const std::string& authorization = {});

} // namespace tessera::bench
