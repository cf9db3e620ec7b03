#pragma once
/// @file
/// A generation request and what comes back of it, step by step: the
/// protocol vocabulary the engine, the wire and clients share
/// (engine/engine.hpp makes them engine::request and
/// engine::request_output).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>

#include "protocol/sampling_params.hpp"

namespace tessera::protocol {

/// A token with its log-probability.
struct token_logprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

/// What the sampler chose.
struct sampled_token {
  int32_t token = 0;
  /// log p(token) under the raw model distribution (log-softmax of the
  /// unmodified logits). Filled when params.logprobs is set, else 0.
  float logprob = 0.0f;
  /// The params.logprobs most likely tokens under that distribution, most
  /// likely first (ties: lower id first). Empty unless asked.
  std::vector<token_logprob> top_logprobs;
};

/// A generation request.
struct request {
  /// Caller-chosen id, unique among unfinished requests.
  uint64_t id = 0;
  /// Token ids; not empty.
  std::vector<int32_t> prompt;
  /// How to sample, when to stop.
  sampling_params params;
  /// Higher is served first. Default: 0.
  int32_t priority = 0;
  /// Per-tenant salt for the prefix cache (see block_hash.hpp).
  std::string cache_salt;
  /// On finish, keep the KV blocks held (for export_request or
  /// export_request_blocks) until release_request. Default: false.
  bool keep_kv = false;
  /// The request continues on another engine after it ends here at
  /// max_tokens (a disaggregated prefill: keep_kv, export, import there).
  /// Ending at max_tokens then keeps back the text that could still start
  /// a stop string and the detokenizer's incomplete bytes, exactly as a
  /// running request does; the importing engine (commit_import) emits them
  /// or cuts a stop string that spans the two engines. Default: false.
  bool continues_elsewhere = false;
};

/// Why a request finished.
enum class finish_reason : uint8_t { none, stop, length, abort };

/// "stop", "length", "abort" (OpenAI's finish_reason), "" for none.
std::string_view to_string(finish_reason r);

/// What one step produced for one request: the token chunk a worker
/// streams to the frontend, and the frontend to an SDK client.
struct token_chunk {
  /// The request's id.
  uint64_t id = 0;
  /// Tokens generated in this step: one, none when only finishing, or up
  /// to 1 + K with speculative decoding (accepted drafts and the target's
  /// own next token).
  std::vector<int32_t> tokens;
  /// Per new token: its log-probability and the top alternatives asked for.
  std::vector<sampled_token> logprobs;
  /// Newly final text (only with a tokenizer): complete UTF-8 characters,
  /// stop strings cut off, never a partial stop string.
  std::string text;
  /// Why the request finished in this step; none while it continues.
  finish_reason finish = finish_reason::none;
  /// The stop string that ended the request; empty for none.
  std::string stop_reason;
  /// The entry of stop_token_ids that ended the request; -1 for none (EOS
  /// and stop strings leave it -1), as vLLM's stop_reason tells them apart.
  int32_t stop_token = -1;
  /// Tokens of the prompt.
  int32_t prompt_tokens = 0;
  /// Prompt tokens whose KV came from the prefix cache.
  int32_t cached_prompt_tokens = 0;
  /// Tokens generated so far, this step's included.
  int32_t output_tokens = 0;
  /// Set when the engine failed the request (finish is then abort), naming
  /// why: engine_errc::bad_logits when the model computed NaN or infinite
  /// logits for it (a corrupt KV cache or weights). Only that request ends;
  /// the others go on. Empty otherwise, and for an abort() by the caller.
  caf::error error;
};

} // namespace tessera::protocol
