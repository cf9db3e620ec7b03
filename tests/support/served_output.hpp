#pragma once
/// @file
/// What a client sees of a completion (text, per-token logprobs, finish
/// reason), from the HTTP API or from one engine alone, so the serving
/// tests can compare the two.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::test {

/// A completion's text, token logprobs and finish reason.
struct served_output {
  std::string text;
  /// As floats: the server writes each float logprob in its shortest
  /// decimal form, which reads back as the same float.
  std::vector<float> logprobs;
  /// "length", "stop", ...
  std::string finish;
  bool operator==(const served_output&) const = default;
};

void PrintTo(const served_output& s, std::ostream* os);

/// One choice of a non-streamed /v1/completions response (logprobs asked).
[[nodiscard]] served_output from_completion(const nlohmann::json& response);

/// The same from an SSE body; sets `ended` when it ends with [DONE].
[[nodiscard]] served_output from_completion_stream(const std::string& body, bool& ended);

/// What one engine on test model `shape` (with its tokenizer, one thread)
/// produces for a request with `prompt`, `max_tokens`, `temperature` and
/// `seed`, ignoring EOS, with logprobs: the reference for the servers.
[[nodiscard]] served_output run_alone(const std::string& shape, const std::vector<int32_t>& prompt,
                                      int max_tokens, float temperature, uint64_t seed);

} // namespace tessera::test
