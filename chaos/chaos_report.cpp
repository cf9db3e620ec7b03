#include "chaos/chaos_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

namespace tessera::chaos {

namespace {

/// `s` from byte `at`, at most 24 bytes, as a JSON string (quotes and
/// escapes: the text of a random model is not printable).
std::string snippet(const std::string& s, size_t at) {
  return nlohmann::json(s.substr(std::min(at, s.size()), 24))
    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string seconds(const std::optional<double>& s) {
  if (!s)
    return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", *s);
  return buf;
}

} // namespace

const char* to_string(request_outcome o) {
  switch (o) {
    case request_outcome::ok:
      return "ok";
    case request_outcome::wrong:
      return "wrong";
    case request_outcome::failed:
      return "failed";
    case request_outcome::lost:
      return "lost";
  }
  return "?";
}

verdict classify(const observed_answer& a, const std::string& reference, double deadline_s) {
  if (!a.ended || a.end_s > deadline_s)
    return {request_outcome::lost, "no answer by the end of the grace period"};
  if (!a.error.empty()) {
    if (a.error.find("timed out") != std::string::npos || a.error.find("timeout") != std::string::npos)
      return {request_outcome::lost, a.error};
    return {request_outcome::failed, a.error};
  }
  if (a.text == reference)
    return {request_outcome::ok, {}};
  const auto diff = std::mismatch(a.text.begin(), a.text.end(), reference.begin(), reference.end());
  const auto at = static_cast<size_t>(diff.first - a.text.begin());
  return {request_outcome::wrong, "differs from byte " + std::to_string(at) + " of " +
                                    std::to_string(reference.size()) + ": got " + snippet(a.text, at) +
                                    ", want " + snippet(reference, at)};
}

bool same_health(const health_sample& a, const health_sample& b) {
  return a.http_status == b.http_status && a.status == b.status && a.workers == b.workers;
}

std::optional<double> time_to_detect(const std::vector<health_sample>& samples, double at_s) {
  if (samples.empty())
    return std::nullopt;
  const health_sample* before = &samples.front();
  for (const auto& s : samples) {
    if (s.t_s <= at_s) {
      before = &s;
      continue;
    }
    if (!same_health(s, *before))
      return s.t_s - at_s;
  }
  return std::nullopt;
}

std::optional<double> time_to_recover(const std::vector<request_record>& records, double at_s) {
  std::optional<double> best;
  for (const auto& r : records)
    if (r.outcome == request_outcome::ok && r.send_s >= at_s && r.end_s >= 0 && (!best || r.end_s - at_s < *best))
      best = r.end_s - at_s;
  return best;
}

size_t in_flight_at(const std::vector<request_record>& records, double at_s) {
  size_t n = 0;
  for (const auto& r : records)
    if (r.send_s <= at_s && (r.end_s < 0 || r.end_s > at_s))
      ++n;
  return n;
}

run_totals count_outcomes(const std::vector<request_record>& records) {
  run_totals t;
  t.sent = records.size();
  for (const auto& r : records) {
    switch (r.outcome) {
      case request_outcome::ok:
        ++t.ok;
        break;
      case request_outcome::wrong:
        ++t.wrong;
        break;
      case request_outcome::failed:
        ++t.failed;
        break;
      case request_outcome::lost:
        ++t.lost;
        break;
    }
  }
  t.completed = t.ok + t.wrong;
  return t;
}

void finish_report(chaos_report& r) {
  for (auto& e : r.events) {
    e.detect_s = time_to_detect(r.health, e.applied_s);
    e.recover_s = time_to_recover(r.requests, e.applied_s);
    e.in_flight = in_flight_at(r.requests, e.applied_s);
  }
  r.totals = count_outcomes(r.requests);
}

bool passed(const chaos_report& r) {
  return r.totals.wrong == 0 && r.totals.lost == 0;
}

std::string render_table(const chaos_report& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "scenario %s: %s\n", r.scenario.c_str(), r.description.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-22s %6s %9s %6s %6s %6s\n", "scenario", "sent", "completed", "failed",
                "wrong", "lost");
  out += line;
  const auto& t = r.totals;
  std::snprintf(line, sizeof line, "%-22s %6zu %9zu %6zu %6zu %6zu\n", r.scenario.c_str(), t.sent, t.completed,
                t.failed, t.wrong, t.lost);
  out += line;
  if (!r.events.empty()) {
    std::snprintf(line, sizeof line, "\n%8s  %-8s %-10s %9s %10s %10s  %s\n", "at", "action", "node", "in flight",
                  "detect", "recover", "note");
    out += line;
    for (const auto& e : r.events) {
      std::string note = e.error.empty() ? e.event.plan : "FAILED: " + e.error;
      std::snprintf(line, sizeof line, "%6.2f s  %-8s %-10s %9zu %10s %10s  %s\n", e.applied_s,
                    std::string{to_string(e.event.action)}.c_str(), e.event.node.c_str(), e.in_flight,
                    seconds(e.detect_s).c_str(),
                    seconds(e.recover_s).c_str(), note.substr(0, 200).c_str());
      out += line;
    }
  }
  std::map<std::string, size_t> details;
  for (const auto& q : r.requests)
    if (q.outcome != request_outcome::ok)
      ++details[std::string{to_string(q.outcome)} + ": " + q.detail.substr(0, 160)];
  if (!details.empty()) {
    std::vector<std::pair<size_t, std::string>> by_count;
    for (const auto& [d, n] : details)
      by_count.emplace_back(n, d);
    std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    out += "\nnot ok:\n";
    for (size_t i = 0; i < by_count.size() && i < 6; ++i) {
      std::snprintf(line, sizeof line, "%6zu  %s\n", by_count[i].first, by_count[i].second.c_str());
      out += line;
    }
  }
  out += passed(r) ? "PASS: no request wrong or lost\n" : "FAIL: requests were wrong or lost\n";
  return out;
}

std::string report_json(const chaos_report& r) {
  using nlohmann::ordered_json;
  auto opt = [](const std::optional<double>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); };
  ordered_json j;
  j["scenario"] = r.scenario;
  j["description"] = r.description;
  j["command"] = r.command;
  j["seed"] = r.seed;
  j["duration_s"] = r.duration_s;
  j["grace_s"] = r.grace_s;
  j["log_dir"] = r.log_dir;
  j["health_path"] = r.health_path;
  j["passed"] = passed(r);
  j["totals"] = {{"sent", r.totals.sent},     {"completed", r.totals.completed}, {"ok", r.totals.ok},
                 {"failed", r.totals.failed}, {"wrong", r.totals.wrong},         {"lost", r.totals.lost}};
  auto& events = j["events"] = ordered_json::array();
  for (const auto& e : r.events)
    events.push_back({{"at_s", e.event.at_s},
                      {"applied_s", e.applied_s},
                      {"action", to_string(e.event.action)},
                      {"node", e.event.node},
                      {"plan", e.event.plan},
                      {"error", e.error},
                      {"detect_s", opt(e.detect_s)},
                      {"recover_s", opt(e.recover_s)},
                      {"in_flight", e.in_flight}});
  auto& health = j["health"] = ordered_json::array();
  for (const auto& h : r.health)
    health.push_back({{"t_s", h.t_s}, {"http_status", h.http_status}, {"status", h.status}, {"workers", h.workers}});
  auto& requests = j["requests"] = ordered_json::array();
  for (const auto& q : r.requests) {
    ordered_json o = {{"index", q.index},
                      {"due_s", q.due_s},
                      {"send_s", q.send_s},
                      {"end_s", q.end_s >= 0 ? ordered_json(q.end_s) : ordered_json(nullptr)},
                      {"temperature", q.temperature},
                      {"prompt_tokens", q.prompt_tokens},
                      {"text_bytes", q.text_bytes},
                      {"outcome", to_string(q.outcome)}};
    if (!q.detail.empty())
      o["detail"] = q.detail;
    requests.push_back(std::move(o));
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace tessera::chaos
