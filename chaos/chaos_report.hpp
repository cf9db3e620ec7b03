#pragma once
/// @file
/// What a chaos run observed and its verdict: each request's outcome
/// (ok, wrong, failed, lost), each event's time to detect (the first
/// change of the frontend's health after it) and time to recover (the
/// first correct answer to a request sent after it), the totals, and the
/// table and JSON the harness writes. Pure functions of the records: no
/// I/O, no clocks (times are seconds since the load started).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chaos/scenario.hpp"

namespace tessera::chaos {

/// How one request ended.
enum class request_outcome : uint8_t {
  /// Completed with the reference text.
  ok,
  /// Completed ([DONE], no error) with another text: a bug.
  wrong,
  /// Ended with an error the client saw (HTTP status, error event,
  /// refused or broken connection, a stream cut short).
  failed,
  /// No answer by the end of the load plus the grace period (or the
  /// client gave up waiting for its next bytes).
  lost,
};

/// "ok", "wrong", "failed", "lost".
[[nodiscard]] const char* to_string(request_outcome o);

/// What the client saw of one request.
struct observed_answer {
  /// Whether the exchange ended (else it was still open when the run was cut).
  bool ended = false;
  /// When it ended, seconds since the load started.
  double end_s = 0;
  /// The completed text ([DONE] came, no error).
  std::string text;
  /// Empty when it completed; else what went wrong (stream_answer::error).
  std::string error;
};

/// The verdict on one request and a short detail (the error, or where a
/// wrong text first differs).
struct verdict {
  request_outcome outcome = request_outcome::ok;
  std::string detail;
};

/// Classifies `a` against the reference text: lost if it did not end by
/// `deadline_s` or ended by a client timeout (an error mentioning "timed
/// out" or "timeout"); failed on any other error; wrong if the text
/// differs; else ok.
[[nodiscard]] verdict classify(const observed_answer& a, const std::string& reference, double deadline_s);

/// One request of the run as reported.
struct request_record {
  size_t index = 0;
  /// When the schedule had it sent, and when it was.
  double due_s = 0;
  double send_s = 0;
  /// < 0: it never ended.
  double end_s = -1;
  float temperature = 0;
  int32_t prompt_tokens = 0;
  /// Bytes of text it received (of a completed answer; else 0).
  size_t text_bytes = 0;
  request_outcome outcome = request_outcome::ok;
  std::string detail;
};

/// The frontend's health at one poll.
struct health_sample {
  double t_s = 0;
  /// HTTP status of GET /health (or /ready); 0: no answer.
  int http_status = 0;
  /// The body's "status" ("ok", "degraded", ...; "" if none).
  std::string status;
  /// The body's "workers" (healthy workers); -1 if none.
  int workers = -1;
};

/// Whether two samples say the same (status code, status and workers).
[[nodiscard]] bool same_health(const health_sample& a, const health_sample& b);

/// An event as applied, and what followed it.
struct event_record {
  scenario_event event;
  /// When it was applied, seconds since the load started.
  double applied_s = 0;
  /// Empty when applying it worked; else why not (no such process, HTTP 400 ...).
  std::string error;
  /// Seconds from applied_s to the first health change observed after it.
  std::optional<double> detect_s;
  /// Seconds from applied_s to the first ok answer of a request sent at or
  /// after applied_s.
  std::optional<double> recover_s;
  /// Requests sent before applied_s that had not ended by then (streams
  /// the event could cut).
  size_t in_flight = 0;
};

/// The first sample after `at_s` that differs from the health before it
/// (the last sample at or before `at_s`, else the first sample): its time
/// minus `at_s`; nullopt if none.
[[nodiscard]] std::optional<double> time_to_detect(const std::vector<health_sample>& samples, double at_s);

/// The earliest end of an ok request sent at or after `at_s`, minus
/// `at_s`; nullopt if none.
[[nodiscard]] std::optional<double> time_to_recover(const std::vector<request_record>& records, double at_s);

/// Requests sent at or before `at_s` that had not ended by then (or never did).
[[nodiscard]] size_t in_flight_at(const std::vector<request_record>& records, double at_s);

/// The totals of a run.
struct run_totals {
  size_t sent = 0;
  /// ok + wrong.
  size_t completed = 0;
  size_t ok = 0;
  size_t wrong = 0;
  size_t failed = 0;
  size_t lost = 0;
};

[[nodiscard]] run_totals count_outcomes(const std::vector<request_record>& records);

/// A whole run.
struct chaos_report {
  std::string scenario;
  std::string description;
  /// The command line that reproduces it.
  std::string command;
  uint64_t seed = 0;
  double duration_s = 0;
  double grace_s = 0;
  /// Where the nodes' logs are.
  std::string log_dir;
  /// The health endpoint polled ("/ready" or "/health").
  std::string health_path;
  std::vector<request_record> requests;
  std::vector<event_record> events;
  /// Health changes only (and the first sample).
  std::vector<health_sample> health;
  run_totals totals;
};

/// Fills each event's detect_s, recover_s and in_flight, and the totals.
void finish_report(chaos_report& r);

/// Whether the run passes: no wrong and no lost request.
[[nodiscard]] bool passed(const chaos_report& r);

/// The table the harness prints: the totals, each event with its times,
/// and the most frequent failure details.
[[nodiscard]] std::string render_table(const chaos_report& r);

/// The JSON the harness writes (every request, event and health change).
[[nodiscard]] std::string report_json(const chaos_report& r);

} // namespace tessera::chaos
