#pragma once
/// @file
/// Per-request generation settings, with the semantics and defaults of
/// vLLM's SamplingParams / the OpenAI API. Protocol vocabulary: clients,
/// the wire and the engine share them (engine/sampling_params.hpp makes them
/// engine::sampling_params).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace tessera::protocol {

/// Speculative decoding of one request (speculative.hpp): how drafts are
/// proposed and how many per step. Output is the same as without it
/// (greedy token for token; sampled with the target's distribution).
struct speculative_params {
  enum class method_kind : uint8_t {
    /// No speculation.
    none,
    /// Prompt lookup: drafts copied from an earlier occurrence of the
    /// sequence's last n-gram.
    ngram,
    /// A smaller draft model with the same tokenizer.
    draft,
  };
  method_kind method = method_kind::none;
  /// Draft tokens proposed per step (K), 1..max_tokens when method is not
  /// none.
  int32_t num_tokens = 0;

  /// Most draft tokens per step.
  static constexpr int32_t max_tokens = 16;

  friend bool operator==(const speculative_params&, const speculative_params&) = default;
};

/// Parses a command line's or a config's speculative setting: "ngram:K"
/// or "draft:K" (K in [1, speculative_params::max_tokens]), or "none".
/// Errors (engine_errc::bad_request) name what was wrong.
[[nodiscard]] caf::expected<speculative_params> parse_speculative(std::string_view text);

/// Constrained decoding (structured output): the output is held to a JSON
/// grammar by a per-step token mask (engine/grammar). The engine compiles
/// the schema once per distinct text (cached) and keeps the matcher with
/// the request, so preemption, prefix caching, imports and migration
/// (which replay the tokens already produced) keep it.
struct structured_output_params {
  enum class kind_type : uint8_t {
    /// Unconstrained.
    none,
    /// Any JSON object (response_format json_object).
    json_object,
    /// A document valid under `schema` (response_format json_schema).
    json_schema,
  };
  kind_type kind = kind_type::none;
  /// The JSON Schema's text for json_schema (key order kept: properties
  /// are written in that order); empty otherwise.
  std::string schema;

  /// Largest schema text.
  static constexpr size_t max_schema_bytes = size_t{64} << 10;

  [[nodiscard]] bool active() const { return kind != kind_type::none; }
  friend bool operator==(const structured_output_params&, const structured_output_params&) = default;
};

/// How to pick tokens and when to stop. Plain data, copyable.
struct sampling_params {
  /// 0 means greedy (argmax). Default: 1.
  float temperature = 1.0f;
  /// Keep the k most likely tokens; 0 or -1 disables. Default: 0.
  int32_t top_k = 0;
  /// Keep the smallest set of tokens whose probability sums to >= top_p.
  /// Default: 1 (off).
  float top_p = 1.0f;
  /// Drop tokens whose probability is below min_p * p(most likely).
  /// Default: 0 (off).
  float min_p = 0.0f;
  /// > 1 discourages tokens seen in the prompt or output (CTRL-style:
  /// positive logits divided, negative multiplied). Default: 1 (off).
  float repetition_penalty = 1.0f;
  /// Subtracted per occurrence in the output. Default: 0.
  float frequency_penalty = 0.0f;
  /// Subtracted once if present in the output. Default: 0.
  float presence_penalty = 0.0f;
  /// Same seed, same output (the random draw for output position i depends
  /// only on (seed, i), so a preempted, migrated or imported request draws
  /// the same numbers). Unseeded requests get a seed from the engine.
  std::optional<uint64_t> seed;
  /// Maximum number of generated tokens. Default: 16.
  int32_t max_tokens = 16;
  /// Generate at least this many tokens before EOS / stop ids may be
  /// sampled (they are masked until then) and stop strings are checked.
  /// Default: 0.
  int32_t min_tokens = 0;
  /// Extra ids that end generation (the model's EOS ids always do unless
  /// ignore_eos). The stop token is part of the output.
  std::vector<int32_t> stop_token_ids;
  /// Strings that end generation; the text is cut before the match.
  std::vector<std::string> stop;
  /// Keep generating through EOS. Default: false.
  bool ignore_eos = false;
  /// Log-probabilities to return: nullopt none; 0 only the chosen token's;
  /// N the chosen token's plus the N most likely. Computed from the raw
  /// model distribution (before penalties, temperature and filtering), as
  /// vLLM does by default. Default: none.
  std::optional<int32_t> logprobs;

  /// Speculative decoding for this request; nullopt: the engine's default
  /// (engine_config::speculative). Default: nullopt.
  std::optional<speculative_params> speculative;

  /// Constrain the output to a JSON grammar. EOS is then allowed exactly
  /// when the document can end (min_tokens does not hold it back), and
  /// near max_tokens the mask closes the document. Refused with
  /// ignore_eos. Default: none.
  structured_output_params structured_output;

  /// Most top logprobs a request may ask for.
  static constexpr int32_t max_logprobs = 20;

  /// Checks every field's range; the error (engine_errc::bad_request)
  /// names the field and the allowed range.
  [[nodiscard]] caf::error validate() const;
};

} // namespace tessera::protocol
