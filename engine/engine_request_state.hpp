#pragma once
/// @file
/// engine::request_state, private to the engine's translation units
/// (engine.cpp: requests, steps, hand-offs; engine_speculative.cpp:
/// drafting and verification). Not part of the engine's interface: include
/// engine/engine.hpp instead.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "engine/detokenizer.hpp"
#include "engine/draft_model.hpp"
#include "engine/engine.hpp"
#include "engine/structured_output.hpp"

namespace tessera::engine {

/// Everything the engine tracks for one request.
struct engine::request_state {
  sequence seq;
  sampling_params params;
  uint64_t seed = 0;
  bool keep_kv = false;
  bool continues_elsewhere = false;
  // Reserved by reserve_import, waiting for its KV: not in the scheduler.
  bool reserved_import = false;
  std::string cache_salt;
  int32_t cached_prompt_tokens = -1; // set at first admission
  // Speculative decoding: the request's method and K; after a step whose
  // drafts all failed, drafting pauses for spec_skip steps, longer after
  // each further miss in a row (spec_misses), so text the n-grams cannot
  // predict costs little.
  speculative_params spec;
  int32_t spec_skip = 0;
  int32_t spec_misses = 0;
  // Method draft: this sequence's KV in the draft model and the q rows of
  // its last proposal (draft_model.hpp); returns its blocks when destroyed.
  draft_cache draft;
  // Structured output: where in the grammar the output so far has led.
  std::optional<grammar::grammar_matcher> matcher;
  // Text: the detokenizer, all final output text, and how much was emitted.
  std::unique_ptr<incremental_detokenizer> detok;
  std::string text;
  size_t emitted = 0;
  size_t max_stop_len = 0;

  [[nodiscard]] int32_t output_len() const { return seq.length() - seq.prompt_len; }
  [[nodiscard]] std::span<const int32_t> prompt() const {
    return std::span{seq.tokens}.first(seq.prompt_len);
  }
  [[nodiscard]] std::span<const int32_t> output() const {
    return std::span{seq.tokens}.subspan(seq.prompt_len);
  }
};

} // namespace tessera::engine
