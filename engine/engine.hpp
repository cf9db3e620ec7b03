#pragma once
/// @file
/// The engine loop of one worker: requests in, one batched forward step at a
/// time, tokens out. Continuous batching (scheduler.hpp), paged KV cache
/// with automatic prefix caching (kv_cache.hpp), sampling (sampler.hpp),
/// stop conditions and incremental detokenization. Not thread-safe: one
/// thread drives it (the worker's engine thread).
///
/// Request life cycle:
///
///   add_request / import_request
///        |
///        v
///   waiting <--preempt-- running --EOS / stop / max_tokens--> finished
///        |                  ^          \--abort--> finished   (keep_kv: held
///        +------admit-------+                                   until release)

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <caf/expected.hpp>

#include "engine/backend.hpp"
#include "engine/kv_export.hpp"
#include "engine/sampler.hpp"
#include "engine/scheduler.hpp"

namespace tessera::engine {

class tokenizer;

/// Engine settings.
struct engine_config {
  scheduler_config scheduling;
  /// Reuse cached prefixes across requests. Default: true.
  bool enable_prefix_caching = true;
  /// Longest prompt + output; 0 means the model's max_position_embeddings.
  int32_t max_model_len = 0;
  /// Seeds unseeded requests' sampling. Default: 0.
  uint64_t seed = 0;
};

/// A generation request.
struct request {
  /// Caller-chosen id, unique among unfinished requests.
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  sampling_params params;
  /// Higher is served first. Default: 0.
  int32_t priority = 0;
  /// Per-tenant salt for the prefix cache (see block_hash.hpp).
  std::string cache_salt;
  /// On finish, keep the KV blocks held (for export_request) until
  /// release_request. Default: false.
  bool keep_kv = false;
};

/// Why a request finished.
enum class finish_reason : uint8_t { none, stop, length, abort };

/// "stop", "length", "abort" (OpenAI's finish_reason), "" for none.
std::string_view to_string(finish_reason r);

/// What one step produced for one request.
struct request_output {
  uint64_t id = 0;
  /// Tokens generated in this step (one, or none when only finishing).
  std::vector<int32_t> tokens;
  /// Per new token: its log-probability and the top alternatives asked for.
  std::vector<sampled_token> logprobs;
  /// Newly final text (only with a tokenizer): complete UTF-8 characters,
  /// stop strings cut off, never a partial stop string.
  std::string text;
  finish_reason finish = finish_reason::none;
  /// The stop string or stop token id that ended the request, as text.
  std::string stop_reason;
  int32_t prompt_tokens = 0;
  /// Prompt tokens whose KV came from the prefix cache.
  int32_t cached_prompt_tokens = 0;
  int32_t output_tokens = 0;
};

/// Counters of the whole engine.
struct engine_stats {
  uint64_t steps = 0;
  uint64_t tokens_computed = 0;
  uint64_t tokens_generated = 0;
  uint64_t preemptions = 0;
  kv_cache_stats cache;
};

/// An inference engine over one backend.
class engine {
public:
  /// Takes ownership of `be`. `tok` (optional) enables text output and stop
  /// strings; its EOS ids join the model's.
  engine(std::unique_ptr<backend> be, const engine_config& cfg,
         std::shared_ptr<const tokenizer> tok = nullptr);
  ~engine();
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Queues a request. Errors (bad_request, naming the problem): duplicate
  /// id, empty prompt, token id out of range, invalid sampling params,
  /// prompt + max_tokens longer than max_model_len or than the KV pool.
  [[nodiscard]] caf::error add_request(request r);

  /// Runs one scheduling step and forward pass; returns an output for each
  /// request that produced a token or finished. Empty when idle.
  std::vector<request_output> step();

  /// Aborts an unfinished request, freeing its blocks; returns its final
  /// output (finish_reason::abort), or nullopt if the id is unknown.
  std::optional<request_output> abort(uint64_t id);

  /// Shares everything `parent_id` has computed with a new request
  /// `child_id` that continues from the same point with `params`; their
  /// KV blocks are shared and copied on write. The parent must be
  /// unfinished.
  [[nodiscard]] caf::error fork_request(uint64_t parent_id, uint64_t child_id,
                                        const sampling_params& params);

  /// Exports the KV cache and state of an unfinished or held request, so
  /// that another engine with the same model and layout can continue it.
  [[nodiscard]] caf::expected<kv_export> export_request(uint64_t id) const;

  /// Frees a finished request held by keep_kv. Returns false if unknown.
  bool release_request(uint64_t id);

  /// Continues a request exported by another engine: `r` carries the id,
  /// params and priority (its prompt is ignored; the export's tokens are
  /// used). Generation resumes after the exported tokens; already
  /// generated tokens count towards max_tokens. Errors (kv_mismatch):
  /// other model or layout, inconsistent sizes, hashes that do not match
  /// the tokens.
  [[nodiscard]] caf::error import_request(request r, const kv_export& kv);

  /// True while any request is unfinished.
  [[nodiscard]] bool has_unfinished() const;
  [[nodiscard]] size_t num_unfinished() const;

  [[nodiscard]] engine_stats stats() const;
  [[nodiscard]] backend& get_backend() { return *backend_; }
  [[nodiscard]] const backend& get_backend() const { return *backend_; }
  [[nodiscard]] uint64_t hash_seed() const { return hash_seed_; }
  [[nodiscard]] int32_t max_model_len() const { return max_model_len_; }

private:
  struct request_state;

  request_state* find(uint64_t id) const;
  [[nodiscard]] caf::error check_new(const request& r, int32_t total_tokens) const;
  request_state& insert(request&& r);
  void finish(request_state& rs, finish_reason why, request_output& out);
  void append_token(request_state& rs, const sampled_token& t, request_output& out);
  void prime_text(request_state& rs);
  void mask_early_stops(const request_state& rs, std::span<float> logits) const;

  std::unique_ptr<backend> backend_;
  engine_config cfg_;
  std::shared_ptr<const tokenizer> tok_;
  std::vector<int32_t> eos_ids_;
  int32_t max_model_len_ = 0;
  uint64_t hash_seed_ = 0;
  uint64_t next_arrival_ = 0;
  std::unique_ptr<kv_cache> cache_;
  std::unique_ptr<scheduler> scheduler_;
  std::unordered_map<uint64_t, std::unique_ptr<request_state>> requests_;
  std::vector<float> logits_;
  sampler_scratch scratch_;
  engine_stats stats_;
};

} // namespace tessera::engine
