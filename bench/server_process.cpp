#include "bench/server_process.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <thread>

#include <caf/sec.hpp>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

} // namespace

caf::expected<spawned_server> spawn_server(const server_spawn_options& o, const say_function& say) {
  std::vector<std::string> args{"serve", "--host", "127.0.0.1", "--port", "0"};
  if (!o.model_dir.empty()) {
    args.emplace_back("--model");
    args.push_back(o.model_dir);
  }
  args.insert(args.end(), o.args.begin(), o.args.end());
  std::string cmd = o.program;
  for (const auto& a : args)
    cmd += " " + a;
  say("starting " + cmd);
  auto child = child_process::spawn(o.program, args);
  if (!child)
    return child.error();
  spawned_server s{std::move(*child), "", "", cmd};
  const auto deadline = clock_type::now() + o.start_timeout;
  while (s.url.empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    auto line = s.child.read_line(std::max(left, std::chrono::milliseconds{1}));
    if (!line)
      return caf::make_error(caf::sec::runtime_error,
                             "the server did not start (" + cmd + "): " + error_text(line.error()));
    constexpr std::string_view listening = "listening on ";
    if (auto at = line->find(listening); at != std::string::npos) {
      auto url = line->substr(at + listening.size());
      s.url = url.substr(0, url.find(' '));
    } else if (line->find("worker(s)") != std::string::npos) {
      s.description = line->substr(line->find(": ") == std::string::npos ? 0 : line->find(": ") + 2);
    }
  }
  say("server at " + s.url + (s.description.empty() ? "" : ": " + s.description));
  return s;
}

server_stop stop_server(spawned_server& s, const say_function& say) {
  const auto t0 = clock_type::now();
  s.child.kill(SIGTERM);
  server_stop out;
  if (auto code = s.child.wait(std::chrono::seconds{15})) {
    out.exit_code = *code;
    out.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    char line[96];
    std::snprintf(line, sizeof line, "the server exited with %d, %.1f s after SIGTERM", *code, out.seconds);
    say(line);
  } else {
    say("the server did not stop within 15 s of SIGTERM; killing it");
    s.child.kill(SIGKILL);
    (void)s.child.wait(std::chrono::seconds{5});
    out.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  }
  return out;
}

caf::error await_health(const http_endpoint& ep, std::chrono::seconds limit, bool retry_unreachable) {
  const auto deadline = clock_type::now() + limit;
  std::string last = "no answer";
  while (clock_type::now() < deadline) {
    auto r = http_fetch(ep, "GET", "/health", "", std::chrono::seconds{5});
    if (r && r->status == 200)
      return {};
    if (!r && !retry_unreachable)
      return r.error();
    last = r ? "HTTP " + std::to_string(r->status) + " " + r->body : error_text(r.error());
    // Polling: /health is the only way to learn that the server is ready.
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  return caf::make_error(caf::sec::runtime_error, "/health did not answer 200 within " +
                                                    std::to_string(limit.count()) + " s: " + last);
}

caf::expected<std::string> first_model(const http_endpoint& ep, const std::string& authorization) {
  auto r = http_fetch(ep, "GET", "/v1/models", "", std::chrono::seconds{10}, authorization);
  if (!r)
    return r.error();
  json j = json::parse(r->body, nullptr, false);
  if (r->status != 200 || j.is_discarded() || !j.contains("data") || !j["data"].is_array() ||
      j["data"].empty() || !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    return caf::make_error(caf::sec::runtime_error, "GET /v1/models: no model in HTTP " +
                                                      std::to_string(r->status) + " " + r->body.substr(0, 200));
  return j["data"][0]["id"].get<std::string>();
}

} // namespace tessera::bench
