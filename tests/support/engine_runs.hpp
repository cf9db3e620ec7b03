#pragma once
/// @file
/// Running requests on an engine to the end, for tests that compare runs
/// token for token (and logprob for logprob).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.hpp"

namespace tessera::test {

/// Everything a request produced, step outputs concatenated.
struct run_result {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  engine::finish_reason finish = engine::finish_reason::none;
  std::string text;
  std::string stop_reason;
  int32_t stop_token = -1;
  int32_t cached_prompt_tokens = 0;
  /// Equal tokens, logprobs and finish reason.
  friend bool operator==(const run_result& a, const run_result& b) {
    return a.tokens == b.tokens && a.logprobs == b.logprobs && a.finish == b.finish;
  }
};

/// `n` token ids in [8, vocab) from a generator seeded with `seed`.
[[nodiscard]] std::vector<int32_t> random_prompt(int n, uint64_t seed, int32_t vocab = 512);

/// A request that ignores EOS, returns logprobs and is seeded by its id.
[[nodiscard]] engine::request make_request(uint64_t id, std::vector<int32_t> prompt, int max_tokens = 12,
                                           float temperature = 0);

/// Adds one step's outputs to `out`, by request id.
void collect(std::map<uint64_t, run_result>& out, const std::vector<engine::request_output>& step);

/// Steps until no request is unfinished.
std::map<uint64_t, run_result> drain(engine::engine& eng);

/// Adds `reqs` and drains.
std::map<uint64_t, run_result> run_all(engine::engine& eng, const std::vector<engine::request>& reqs);

/// Adds `r` and drains; its result.
run_result run_one(engine::engine& eng, const engine::request& r);

/// What one-sided RMA does in a hand-off: each block `plan` wants, copied
/// from `from`'s pool (the export `src`) into `to`'s. Returns the blocks
/// copied.
size_t put_blocks(const engine::engine& from, const engine::kv_export_blocks& src, engine::engine& to,
                  const engine::kv_import_plan& plan);

} // namespace tessera::test
