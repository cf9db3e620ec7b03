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
///   add_request / import_request       reserve_import
///        |                                   |
///        |                                   v
///        |    +-------commit_import------ reserved --cancel_import / abort--> gone
///        v    v
///   waiting <--preempt-- running --EOS / stop / max_tokens--> finished
///        |                  ^          \--abort--> finished   (keep_kv: held
///        +------admit-------+                                   until release)
///
/// A running request whose logits come out NaN or infinite finishes as
/// abort, with request_output::error set, and is never held (see step()).
/// A reserved request waits for its KV to be written into its blocks by
/// someone else (kv_export.hpp has the zero-copy hand-off).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "engine/backend.hpp"
#include "engine/kv_export.hpp"
#include "engine/sampler.hpp"
#include "engine/scheduler.hpp"
#include "protocol/request.hpp"

namespace tessera::engine {

class tokenizer;
class structured_output;
class draft_model;

/// Engine settings.
struct engine_config {
  /// Batching limits (scheduler.hpp).
  scheduler_config scheduling;
  /// Reuse cached prefixes across requests. Default: true.
  bool enable_prefix_caching = true;
  /// Longest prompt + output; 0 means the model's max_position_embeddings.
  int32_t max_model_len = 0;
  /// Seeds unseeded requests' sampling. Default: 0.
  uint64_t seed = 0;
  /// Keys the prefix-cache hash chain (block_hash.hpp): every engine and
  /// router of a cluster must have the same one. Default: the process's
  /// random key (process_kv_hash_key).
  kv_hash_key hash_key = process_kv_hash_key();
  /// Speculative decoding for requests whose params do not say
  /// (sampling_params::speculative); method draft needs a draft model
  /// (engine::attach_draft_model). Default: none.
  speculative_params speculative;
};

using protocol::finish_reason;
using protocol::to_string;
/// A generation request (protocol::request: the wire carries it whole).
using request = protocol::request;
/// What one step produced for one request (protocol::token_chunk).
using request_output = protocol::token_chunk;

/// Counters of the whole engine.
struct engine_stats {
  /// Forward steps run.
  uint64_t steps = 0;
  /// Tokens whose KV was computed (prefill and decode).
  uint64_t tokens_computed = 0;
  /// Tokens sampled.
  uint64_t tokens_generated = 0;
  /// Times a running request lost its blocks to make room.
  uint64_t preemptions = 0;
  /// Speculative draft tokens the target verified, and of them those it
  /// accepted (acceptance rate = accepted / verified).
  uint64_t draft_tokens = 0;
  uint64_t accepted_draft_tokens = 0;
  /// Blocks in the KV pool.
  int32_t num_blocks = 0;
  /// Blocks no request holds: never used, or cached and evictable. Blocks of
  /// running, held (keep_kv) and reserved requests are not free.
  int32_t free_blocks = 0;
  /// Prefix-cache and pool counters.
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
  /// request that produced a token or finished. Empty when idle. A request
  /// whose logits are NaN or infinite ends in this step with
  /// request_output::error set (bad_logits), finish abort and no token; as
  /// its KV may be what is corrupt, the prefix cache then forgets every
  /// cached prefix (blocks in use keep their data), so later requests
  /// recompute rather than reuse it.
  std::vector<request_output> step();

  /// Aborts an unfinished, held or reserved request, freeing its blocks;
  /// returns its final output (finish_reason::abort), or nullopt if the id
  /// is unknown. A reserved import is aborted as cancel_import does, with
  /// the same caveat.
  std::optional<request_output> abort(uint64_t id);

  /// Shares everything `parent_id` has computed with a new request
  /// `child_id` that continues from the same point with `params`; their
  /// KV blocks are shared and copied on write. The parent must be
  /// unfinished.
  [[nodiscard]] caf::error fork_request(uint64_t parent_id, uint64_t child_id,
                                        const sampling_params& params);

  /// Exports the KV cache and state of an unfinished or held request, so
  /// that another engine with the same model and layout can continue it.
  /// The bytes are copied into kv_export::data (export_request_blocks, then
  /// read_block per block). Errors (unknown_request): no such request, or
  /// a reserved import (its KV is not there yet).
  [[nodiscard]] caf::expected<kv_export> export_request(uint64_t id) const;

  /// Exports an unfinished or held request without copying its KV: the
  /// state (meta.data empty) and the ids of the blocks of this engine's
  /// pool that hold it, to be read in place (backend::kv_pool_memory, RMA).
  /// The blocks stay the request's: for a held request (keep_kv) until
  /// release_request or abort; for an unfinished one only until the next
  /// step(), which may preempt it or write its last block, so hand off held
  /// requests. Errors as export_request.
  [[nodiscard]] caf::expected<kv_export_blocks> export_request_blocks(uint64_t id) const;

  /// Frees a finished request held by keep_kv. Returns false if unknown or
  /// not held.
  bool release_request(uint64_t id);

  /// Continues a request exported by another engine: `r` carries the id,
  /// params and priority (its prompt is ignored; the export's tokens are
  /// used). Generation resumes after the exported tokens; already
  /// generated tokens count towards max_tokens. The same as reserve_import,
  /// write_block of kv.data for each block that needs data, commit_import.
  /// Errors: as reserve_import, and kv_mismatch when kv.data is not
  /// ceil(num_computed / block_tokens) blocks. Nothing is kept on error.
  [[nodiscard]] caf::error import_request(request r, const kv_export& kv);

  /// First half of a zero-copy import: validates `meta` as import_request
  /// does (its data is ignored) and reserves one block per exported block
  /// for request `r` (id, params, priority, cache_salt; its prompt is
  /// ignored). Full blocks whose hash this engine's prefix cache already
  /// holds are shared, not allocated, and need no data (counted as prefix
  /// hits in stats().cache); the last, partial block is always fresh. The
  /// request is reserved: not scheduled, not counted by has_unfinished(),
  /// its blocks used; write the bytes of every block with needs_data, then
  /// commit_import or cancel_import. Errors, with nothing reserved:
  /// kv_mismatch (other model or layout, inconsistent sizes, token ids
  /// outside the vocabulary, hashes that do not match the tokens),
  /// bad_request (id in use, bad params, too long, max_tokens already
  /// reached), out_of_blocks (longer than the pool), no_free_blocks (too
  /// few free blocks now).
  [[nodiscard]] caf::expected<kv_import_plan> reserve_import(request r, const kv_export& meta);

  /// Second half of a zero-copy import: the bytes of every block of the
  /// plan with needs_data are in this engine's pool (RMA, write_block).
  /// Registers the full blocks in the prefix cache and makes the request
  /// waiting; it then generates exactly as after import_request. Errors
  /// (unknown_request): `id` is not a reserved import.
  [[nodiscard]] caf::error commit_import(uint64_t id);

  /// Abandons a reserved import (the transfer failed, the peer died): frees
  /// its blocks and forgets the request. Call it only when no write into
  /// those blocks can still land. Returns false if `id` is not a reserved
  /// import.
  bool cancel_import(uint64_t id);

  /// True while any request is unfinished, i.e. step() has work. Reserved
  /// imports do not count (they wait for data, not for steps): a worker
  /// steps while this is true and is woken again by commit_import.
  [[nodiscard]] bool has_unfinished() const;
  /// Unfinished requests: waiting or running, not reserved, not held.
  [[nodiscard]] size_t num_unfinished() const;
  /// Imports reserved and neither committed nor cancelled.
  [[nodiscard]] size_t num_reserved_imports() const;

  /// Starts (or stops) recording changes to the prefix cache's hashes
  /// (KV events for the router). Default: off.
  void record_kv_events(bool on);
  /// The prefix-cache changes since the last call, in order.
  [[nodiscard]] std::vector<kv_cache_event> drain_kv_events();
  /// Every block hash the prefix cache holds now (for a full resend of
  /// the KV view after a reader lost events).
  [[nodiscard]] std::vector<kv_block_hash> cached_block_hashes() const;

  // -- lower KV tiers (kvstore): blocks out of and into the prefix cache --
  // (engine_tiers.cpp)

  /// The chained hashes of the full blocks of `tokens` with `cache_salt`,
  /// as this engine names them (block_hash.hpp, seed hash_seed()).
  [[nodiscard]] std::vector<kv_block_hash> block_hashes(std::span<const int32_t> tokens,
                                                        std::string_view cache_salt = {}) const;
  /// How many leading hashes of `hashes` the prefix cache holds now.
  [[nodiscard]] size_t cached_prefix_blocks(std::span<const kv_block_hash> hashes) const;
  /// Copies the block cached under `hash` (layout().block_bytes() bytes)
  /// into `out`; false when it is not cached or `out` has another size.
  bool read_cached_block(kv_block_hash hash, std::span<std::byte> out) const;
  /// Fills bytes of block `index` of a chain into `out`
  /// (layout().block_bytes()); false when it has none.
  using block_source = std::function<bool(size_t index, std::span<std::byte> out)>;
  /// Extends the cached prefix of `hashes` with blocks from a lower tier,
  /// as if a finished request had left them: holds the blocks of the
  /// leading run the pool caches (so nothing below evicts them), then for
  /// each next hash takes a free block (the least recently freed, evicting
  /// what it cached), asks `fetch` for its bytes and caches it under that
  /// hash, until `fetch` has none or no block is free; then lets them all
  /// go, the chain's first block last (it is evicted last). The caller
  /// vouches that the bytes are the KV of the blocks `hashes` name in this
  /// engine's namespace (the kv store verifies its checksums). Returns the
  /// leading blocks of `hashes` cached afterwards.
  size_t extend_cached_prefix(std::span<const kv_block_hash> hashes, const block_source& fetch);

  /// Makes `draft` (a smaller model with the same tokenizer, its own KV
  /// pool) this engine's draft model for speculative method draft
  /// (draft_model.hpp). Call before adding requests. Errors (bad_request,
  /// naming the difference): a vocabulary or special tokens other than the
  /// target's, a draft pool smaller than one longest sequence, or a draft
  /// model already attached.
  [[nodiscard]] caf::error attach_draft_model(std::unique_ptr<backend> draft);
  /// The draft model, or null.
  [[nodiscard]] const draft_model* get_draft_model() const { return draft_.get(); }

  /// Counters and pool occupancy, as of now.
  [[nodiscard]] engine_stats stats() const;
  /// The backend (owned by the engine), e.g. for kv_pool_memory.
  [[nodiscard]] backend& get_backend() { return *backend_; }
  /// The backend, read-only.
  [[nodiscard]] const backend& get_backend() const { return *backend_; }
  /// Namespace of this engine's prefix-cache hashes (block_hash.hpp).
  [[nodiscard]] uint64_t hash_seed() const { return hash_seed_; }
  /// Key of this engine's prefix-cache hash chain (engine_config::hash_key).
  [[nodiscard]] const kv_hash_key& hash_key() const { return cfg_.hash_key; }
  /// Longest prompt + output this engine accepts, in tokens.
  [[nodiscard]] int32_t max_model_len() const { return max_model_len_; }

private:
  struct request_state;

  request_state* find(uint64_t id) const;
  [[nodiscard]] caf::error check_new(const request& r, int32_t total_tokens) const;
  [[nodiscard]] caf::error check_import(const request& r, const kv_export& meta) const;
  [[nodiscard]] caf::expected<kv_import_plan> reserve_checked(request r, const kv_export& meta);
  request_state& insert(request&& r);
  void finish(request_state& rs, finish_reason why, request_output& out);
  void fail(request_state& rs, const caf::error& why, request_output& out);
  void append_token(request_state& rs, const sampled_token& t, request_output& out);
  void prime_text(request_state& rs);
  void mask_early_stops(const request_state& rs, std::span<float> logits) const;
  /// Starts the structured-output matcher of a new, forked or imported
  /// request, replaying its output so far (bad_request if it does not fit).
  [[nodiscard]] caf::error start_structured(request_state& rs);
  /// Appends n-gram drafts to the running, decoding sequences that speculate.
  void propose_drafts();
  /// Samples and appends the token of one logits row; false if it failed
  /// the request (bad logits).
  bool emit_row(request_state& rs, std::span<float> row, request_output& out);
  /// Verifies seq's drafts against its 1 + num_draft logits rows from
  /// `first_row` and appends what holds.
  void verify_drafts(request_state& rs, size_t first_row, request_output& out);
  /// Verifies one draft drawn from a draft model's q (sampled requests) by
  /// the rejection rule; appends the token it emits. False if the request
  /// failed; `accepted` tells whether the draft stood.
  bool verify_sampled_draft(request_state& rs, std::span<float> row, int32_t draft,
                            std::span<const float> q, request_output& out, bool& accepted);

  std::unique_ptr<backend> backend_;
  engine_config cfg_;
  std::shared_ptr<const tokenizer> tok_;
  std::vector<int32_t> eos_ids_;
  int32_t max_model_len_ = 0;
  uint64_t hash_seed_ = 0;
  uint64_t next_arrival_ = 0;
  std::unique_ptr<kv_cache> cache_;
  std::unique_ptr<scheduler> scheduler_;
  // Before requests_: their draft caches return blocks to it.
  std::unique_ptr<draft_model> draft_;
  std::unordered_map<uint64_t, std::unique_ptr<request_state>> requests_;
  std::vector<float> logits_;
  std::vector<int32_t> drafts_;
  std::vector<float> target_probs_;
  sampler_scratch scratch_;
  std::unique_ptr<structured_output> structured_;
  engine_stats stats_;
};

} // namespace tessera::engine
