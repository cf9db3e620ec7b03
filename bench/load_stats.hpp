#pragma once
/// @file
/// What a closed-loop load run measured, request by request, and its summary
/// per concurrency level: time to first token, inter-token latency and time
/// per output token percentiles, requests/s and output tokens/s. Shared by
/// `tessera bench serve` (requests over HTTP) and its engine-alone baseline
/// (the same requests on an engine in this process). Pure functions.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::bench {

/// One request of a load run. Times are seconds since the run started.
struct request_sample {
  /// When the request was sent (HTTP: just before the write).
  double start_s = 0;
  /// When its first text arrived; < 0 if none did.
  double first_token_s = -1;
  /// When its last text arrived; < 0 if none did.
  double last_token_s = -1;
  /// When it ended (the stream's [DONE], an error, a broken connection).
  double end_s = 0;
  /// Gaps between consecutive arrivals of new text (inter-token latency;
  /// one per chunk after the first, so a chunk carrying two tokens counts
  /// once), seconds.
  std::vector<double> token_gaps_s;
  /// Output tokens: usage.completion_tokens when the server sent usage,
  /// else the number of text chunks.
  int64_t output_tokens = 0;
  /// Chunks that carried new text.
  int64_t text_chunks = 0;
  /// Empty when the request succeeded (HTTP 200, [DONE], no error event),
  /// else what went wrong, e.g. "HTTP 503: ..." or "read: end of stream".
  std::string error;

  /// A chunk with new text arrived at `t_s`: the first sets the time to
  /// first token, each later one adds its gap.
  void add_text_chunk(double t_s) {
    if (first_token_s < 0)
      first_token_s = t_s;
    else
      token_gaps_s.push_back(t_s - last_token_s);
    last_token_s = t_s;
    ++text_chunks;
  }
};

/// Percentiles of a set of latencies, in milliseconds; all 0 when empty.
struct latency_percentiles {
  size_t count = 0;
  double mean_ms = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
};

/// The p-th percentile (0 <= p <= 100) of `values`, interpolated linearly
/// between the two nearest ranks (numpy's default); 0 when empty.
[[nodiscard]] double percentile(std::vector<double> values, double p);

/// Percentiles of `seconds`, reported in milliseconds.
[[nodiscard]] latency_percentiles latency_percentiles_ms(const std::vector<double>& seconds);

/// The summary of one concurrency level of a run.
struct level_summary {
  /// Requests in flight at once (closed loop: C clients).
  int concurrency = 0;
  /// Requests that ended (successful and failed).
  size_t requests = 0;
  /// Requests that failed.
  size_t errors = 0;
  /// The first error's text (empty if none), to say what went wrong.
  std::string first_error;
  /// From the first request's start to the last one's end, seconds.
  double wall_s = 0;
  /// Output tokens of the successful requests.
  int64_t output_tokens = 0;
  /// Successful requests / wall_s.
  double requests_per_s = 0;
  /// output_tokens / wall_s: aggregate generation throughput.
  double output_tok_s = 0;
  /// Time to first token of successful requests.
  latency_percentiles ttft;
  /// Inter-token latency: every gap between text chunks of successful requests.
  latency_percentiles itl;
  /// Time per output token after the first, per successful request with
  /// at least two tokens: (last text - first text) / (output tokens - 1).
  latency_percentiles tpot;
};

/// The prompt of request `index` of a load run: `tokens` token ids drawn
/// uniformly from [8, 264) (the byte tokens of the demo tokenizer, valid in
/// every model with a vocabulary of at least 264) by a generator seeded with
/// (seed, index), so the server and the engine-alone baseline get the same
/// prompts, and no two requests share a prefix block.
[[nodiscard]] std::vector<int32_t> load_prompt(uint64_t seed, uint64_t index, int tokens);

/// Summarizes the requests of one level.
[[nodiscard]] level_summary summarize_level(int concurrency, const std::vector<request_sample>& samples);

} // namespace tessera::bench
