#pragma once
/// @file
/// Replaying trace requests against an OpenAI-compatible server, open loop:
/// request i is sent at its trace arrival time divided by the speed-up,
/// whether or not earlier ones have finished (run_open_loop), as a streamed
/// `POST /v1/completions` whose `prompt` is the token ids trace_prompt
/// expands it to, `max_tokens` its output_length (optionally capped),
/// `ignore_eos`, `temperature` 0 and `stream_options.include_usage` (the
/// usage chunk gives prompt_tokens and prompt_tokens_details.cached_tokens).
/// Records per request what trace_report.hpp summarizes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "bench/http_client.hpp"
#include "bench/load_stats.hpp"
#include "bench/mooncake_trace.hpp"
#include "bench/trace_prompt.hpp"

namespace tessera::bench {

/// How to replay.
struct trace_replay_options {
  /// The "model" of every request.
  std::string model;
  /// Trace time / replay time: 2 sends the trace in half its duration.
  /// Default: 1.
  double speedup = 1;
  /// > 0: max_tokens = min(output_length, max_output). Default: 0 (no cap).
  int64_t max_output = 0;
  /// Tokens per hash id. Default: 512.
  int64_t block_tokens = 512;
  /// Token ids the blocks are drawn from. Default: 8..263.
  token_range tokens;
  /// Seeds every block's tokens (another seed, other prompts with the same
  /// sharing: a replay against a server that kept an earlier replay's
  /// cache). Default: 0.
  uint64_t seed = 0;
  /// Longest wait for any step of a request. Default: 300 s.
  std::chrono::milliseconds io_timeout{300'000};
  /// How often a progress line is written. Default: 5 s.
  std::chrono::milliseconds progress_interval{5000};
  /// Stop sending once this many requests have ended and none succeeded (a
  /// server that fails everything); 0: never. Default: 16.
  size_t give_up_after = 16;
};

/// One replayed request. Times are seconds since the replay started.
struct trace_sample {
  /// Its timing and outcome (start_s is when it was sent).
  request_sample timing;
  /// Its arrival in the trace, seconds from the trace's start (unscaled).
  double trace_s = 0;
  /// When it was due: its arrival relative to the first replayed request's,
  /// divided by the speed-up. timing.start_s - due_s is the send lag.
  double due_s = 0;
  /// Prompt tokens sent (the trace's input_length).
  int64_t prompt_tokens = 0;
  /// max_tokens sent.
  int64_t max_tokens = 0;
  /// usage.prompt_tokens; -1 if the server sent no usage.
  int64_t usage_prompt_tokens = -1;
  /// usage.prompt_tokens_details.cached_tokens; -1 if absent.
  int64_t cached_tokens = -1;
  /// False for a request never sent (the replay gave up before its time).
  bool sent = false;
};

/// A progress report while a replay runs.
struct trace_progress {
  double elapsed_s = 0;
  size_t sent = 0;
  size_t done = 0;
  size_t errors = 0;
  /// Sum of cached_tokens / sum of prompt tokens over successful requests.
  double hit_rate = 0;
  /// Largest send lag so far, seconds.
  double max_lag_s = 0;
};

/// What a replay measured.
struct trace_replay_result {
  /// One per request, in schedule order.
  std::vector<trace_sample> samples;
  /// Connections the client opened, and the most requests in flight at once.
  size_t connections_opened = 0;
  size_t peak_in_flight = 0;
};

/// Replays `requests` (ordered by timestamp) against `ep`; `progress` is
/// called every progress_interval. Errors: the host cannot be resolved,
/// bad options (speedup <= 0). A failing request is an error in its sample,
/// not of the call.
[[nodiscard]] caf::expected<trace_replay_result>
replay_trace(const http_endpoint& ep, const std::vector<trace_request>& requests, const trace_replay_options& opts,
             const std::function<void(const trace_progress&)>& progress);

/// The JSON body of the streamed completion request for `prompt`.
[[nodiscard]] std::string trace_request_body(const std::string& model, const std::vector<int32_t>& prompt,
                                             int64_t max_tokens);

} // namespace tessera::bench
