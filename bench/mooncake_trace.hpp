#pragma once
/// @file
/// Request traces in the Mooncake format (kvcache-ai/Mooncake,
/// FAST25-release/traces): one JSON object per line,
///
///   {"timestamp": 27482, "input_length": 6955, "output_length": 52,
///    "hash_ids": [46, 47, 48, ..., 2354]}
///
/// `timestamp` is the arrival in milliseconds from the start; `hash_ids`
/// names each `block_tokens`-token block of the input (the last one may be
/// partial), prefix-chained: two requests whose first k ids are equal share
/// their first k blocks of tokens. Parsing is strict and bounded: every
/// line is checked, and an error names the file, the line and the field.
/// Pure functions of their input: no clocks, no network.

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::bench {

/// One request of a trace.
struct trace_request {
  /// Arrival, milliseconds from the start of the trace.
  int64_t timestamp_ms = 0;
  /// Prompt tokens, >= 1.
  int64_t input_length = 0;
  /// Tokens to generate, >= 1.
  int64_t output_length = 0;
  /// One id per block of the prompt: ceil(input_length / block_tokens) ids.
  std::vector<int64_t> hash_ids;
  /// The 1-based line of the file it came from (for messages).
  int64_t line = 0;
};

/// Limits and layout of a trace. The defaults fit the released Mooncake
/// traces (the conversation trace's longest prompt is 126,195 tokens).
struct trace_parse_options {
  /// Tokens per hash id. Default: 512 (the Mooncake traces').
  int64_t block_tokens = 512;
  /// Longest line, bytes. Default: 4 MiB.
  size_t max_line_bytes = size_t{4} << 20;
  /// Most requests in a file. Default: 10 million.
  size_t max_requests = 10'000'000;
  /// Largest input_length. Default: 2^20 tokens.
  int64_t max_input_length = int64_t{1} << 20;
  /// Largest output_length. Default: 2^20 tokens.
  int64_t max_output_length = int64_t{1} << 20;
  /// Largest timestamp, ms. Default: 2^40 (about 35 years).
  int64_t max_timestamp_ms = int64_t{1} << 40;
};

/// A parsed trace.
struct mooncake_trace {
  /// The requests, ordered by timestamp (a stable sort keeps the file's
  /// order among equal timestamps).
  std::vector<trace_request> requests;
  /// Lines whose timestamp was smaller than the line before; when > 0 the
  /// requests were sorted (callers say so).
  size_t out_of_order_lines = 0;
};

/// Parses a trace from `in`; `file_name` only names it in errors. Blank
/// lines are skipped; fields other than the four above are ignored. Errors
/// (caf::sec::invalid_argument): "FILE:LINE: FIELD: what is wrong", e.g.
/// "t.jsonl:7: hash_ids: 3 ids for input_length 2000, expected
/// ceil(2000 / 512) = 4"; also a line that is not a JSON object, a file
/// with no request, and the limits of `opts` exceeded.
[[nodiscard]] caf::expected<mooncake_trace> parse_mooncake_trace(std::istream& in, const std::string& file_name,
                                                                 const trace_parse_options& opts = {});

/// Opens and parses the file at `path` (errors as parse_mooncake_trace,
/// and "cannot open PATH").
[[nodiscard]] caf::expected<mooncake_trace> load_mooncake_trace(const std::string& path,
                                                                const trace_parse_options& opts = {});

/// What to replay of a trace.
struct trace_selection {
  /// > 0: only requests with timestamp_ms < minutes * 60000. Default: 0 (all).
  double minutes = 0;
  /// > 0: skip requests with input_length above it (a model's context
  /// limit). Default: 0 (none skipped).
  int64_t max_input_tokens = 0;
  /// > 0: at most this many requests (the first ones). Default: 0 (all).
  size_t max_requests = 0;
};

/// The requests of `trace` that `sel` keeps, in order; `skipped_long` (if
/// given) counts those dropped by max_input_tokens.
[[nodiscard]] std::vector<trace_request> select_requests(const mooncake_trace& trace, const trace_selection& sel,
                                                         size_t* skipped_long = nullptr);

} // namespace tessera::bench
