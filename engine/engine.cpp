#include "engine/engine.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "common/assert.hpp"
#include "common/error.hpp"
#include "engine/detokenizer.hpp"
#include "engine/draft_model.hpp"
#include "engine/engine_errc.hpp"
#include "engine/engine_request_state.hpp"
#include "engine/kv_int8.hpp"
#include "engine/structured_output.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::engine {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Where the text that may be emitted ends: everything but what could
/// still become the start of a stop string, never inside a UTF-8
/// character, never before what was already emitted.
size_t ready_text_end(const std::string& text, size_t emitted, size_t max_stop_len) {
  const size_t hold = max_stop_len > 0 ? max_stop_len - 1 : 0;
  size_t upto = text.size() > hold ? text.size() - hold : 0;
  while (upto > emitted && upto < text.size() && (static_cast<unsigned char>(text[upto]) & 0xc0) == 0x80)
    --upto;
  return std::max(upto, emitted);
}

} // namespace

engine::engine(std::unique_ptr<backend> be, const engine_config& cfg,
               std::shared_ptr<const tokenizer> tok)
  : backend_(std::move(be)), cfg_(cfg), tok_(std::move(tok)) {
  const auto& mc = backend_->config();
  eos_ids_ = mc.eos_token_ids;
  if (tok_)
    for (auto id : tok_->settings().eos_ids)
      if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end())
        eos_ids_.push_back(id);
  max_model_len_ = cfg.max_model_len > 0 ? std::min(cfg.max_model_len, mc.max_position_embeddings)
                                         : mc.max_position_embeddings;
  const auto& layout = backend_->layout();
  hash_seed_ = kv_hash_seed(backend_->model_fingerprint(), layout.block_tokens,
                            to_safetensors_name(layout.kv_dtype));
  cache_ = std::make_unique<kv_cache>(backend_->num_blocks(), layout.block_tokens,
                                      cfg.enable_prefix_caching);
  scheduler_ = std::make_unique<scheduler>(cfg.scheduling, *cache_, cfg.hash_key);
  structured_ = std::make_unique<structured_output>(tok_, eos_ids_);
}

engine::~engine() = default;

engine::request_state* engine::find(uint64_t id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

caf::error engine::check_new(const request& r, int32_t total_tokens) const {
  auto bad = [](std::string what) { return make_engine_error(engine_errc::bad_request, std::move(what)); };
  if (find(r.id) != nullptr)
    return bad("request id " + std::to_string(r.id) + " is already in use");
  if (auto err = r.params.validate())
    return err;
  const auto spec = r.params.speculative ? *r.params.speculative : cfg_.speculative;
  if (spec.method == speculative_params::method_kind::draft && !draft_)
    return bad("speculative method draft needs a draft model, and this engine has none "
               "(start it with --draft-model DIR, or use method ngram)");
  const int32_t capacity = backend_->num_blocks() * backend_->layout().block_tokens;
  const int64_t need = static_cast<int64_t>(total_tokens) + r.params.max_tokens;
  if (need > max_model_len_)
    return bad("prompt (" + std::to_string(total_tokens) + " tokens) plus max_tokens (" +
               std::to_string(r.params.max_tokens) + ") exceeds the maximum context length of " +
               std::to_string(max_model_len_) + " tokens");
  if (need > capacity)
    return make_engine_error(engine_errc::out_of_blocks,
                             "prompt plus max_tokens (" + std::to_string(need) +
                               " tokens) exceeds the KV cache capacity of " +
                               std::to_string(capacity) + " tokens");
  return {};
}

engine::request_state& engine::insert(request&& r) {
  auto rs = std::make_unique<request_state>();
  rs->seq.id = r.id;
  rs->seq.priority = r.priority;
  rs->seq.arrival = next_arrival_++;
  rs->seq.hash_root = kv_hash_root(cfg_.hash_key, hash_seed_, r.cache_salt);
  rs->params = std::move(r.params);
  rs->seed = rs->params.seed ? *rs->params.seed : splitmix64(cfg_.seed ^ splitmix64(rs->seq.arrival));
  rs->keep_kv = r.keep_kv;
  rs->continues_elsewhere = r.continues_elsewhere;
  rs->spec = rs->params.speculative ? *rs->params.speculative : cfg_.speculative;
  rs->cache_salt = std::move(r.cache_salt);
  if (tok_ && !rs->params.stop.empty())
    for (const auto& s : rs->params.stop)
      rs->max_stop_len = std::max(rs->max_stop_len, s.size());
  if (tok_)
    rs->detok = std::make_unique<incremental_detokenizer>(*tok_);
  auto& slot = requests_[rs->seq.id];
  slot = std::move(rs);
  return *slot;
}

caf::error engine::add_request(request r) {
  if (r.prompt.empty())
    return make_engine_error(engine_errc::bad_request, "the prompt is empty");
  const int32_t vocab = backend_->config().vocab_size;
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab)
      return make_engine_error(engine_errc::bad_request,
                               "prompt token " + std::to_string(i) + " is " +
                                 std::to_string(r.prompt[i]) + ", outside the vocabulary [0, " +
                                 std::to_string(vocab) + ")");
  if (auto err = check_new(r, static_cast<int32_t>(r.prompt.size())))
    return err;
  auto prompt = std::move(r.prompt);
  auto& rs = insert(std::move(r));
  rs.seq.prompt_len = static_cast<int32_t>(prompt.size());
  rs.seq.tokens = std::move(prompt);
  if (auto err = start_structured(rs)) {
    requests_.erase(rs.seq.id);
    return err;
  }
  scheduler_->add(&rs.seq);
  return {};
}

void engine::finish(request_state& rs, finish_reason why, request_output& out) {
  out.finish = why;
  // Handed over at max_tokens: the importing engine goes on from the same
  // text (prime_text), so keep back exactly what a running request would.
  const bool handed_over = rs.continues_elsewhere && why == finish_reason::length;
  if (rs.detok && why != finish_reason::stop && !handed_over)
    rs.text += rs.detok->finish();
  const size_t upto = handed_over ? ready_text_end(rs.text, rs.emitted, rs.max_stop_len) : rs.text.size();
  if (rs.detok && rs.emitted < upto) {
    out.text += rs.text.substr(rs.emitted, upto - rs.emitted);
    rs.emitted = upto;
  }
  if (rs.keep_kv && why != finish_reason::abort)
    scheduler_->hold(&rs.seq); // held for export_request until release_request
  else
    scheduler_->remove(&rs.seq);
}

void engine::fail(request_state& rs, const caf::error& why, request_output& out) {
  // The logits are those of the sequence's last token, at position length - 1.
  out.error = make_engine_error(
    engine_errc::bad_logits,
    "request " + std::to_string(rs.seq.id) + ": " + error_message(why) + " at position " +
      std::to_string(rs.seq.length() - 1) + " (corrupt KV cache or weights)");
  // Whichever block is corrupt may be cached under a prefix hash, and
  // nothing tells which: forget them all rather than fail every later
  // request sharing that prefix. The blocks of running requests stay theirs.
  cache_->reset_prefix_cache();
  // Nothing worth holding for export: its KV is suspect.
  rs.keep_kv = false;
  finish(rs, finish_reason::abort, out);
}

void engine::prime_text(request_state& rs) {
  // Output generated elsewhere (a fork's parent, an exporting engine) was
  // streamed there up to the text that could still start a stop string:
  // feed it to the detokenizer (for stop strings spanning it) and emit only
  // what was held back there.
  if (rs.detok)
    for (auto t : rs.output())
      rs.text += rs.detok->push(t);
  rs.emitted = ready_text_end(rs.text, 0, rs.max_stop_len);
}

caf::error engine::start_structured(request_state& rs) {
  if (!rs.params.structured_output.active())
    return {};
  auto m = structured_->start(rs.params.structured_output, rs.output());
  if (!m)
    return std::move(m.error());
  rs.matcher = std::move(*m);
  return {};
}

void engine::mask_early_stops(const request_state& rs, std::span<float> logits) const {
  // vLLM's min_tokens: EOS and stop ids are not candidates until the request
  // has generated min_tokens tokens.
  if (rs.output_len() >= rs.params.min_tokens)
    return;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // With a grammar, EOS is allowed exactly when the document can end.
  if (!rs.params.ignore_eos && !rs.matcher)
    for (auto id : eos_ids_)
      if (id >= 0 && static_cast<size_t>(id) < logits.size())
        logits[id] = neg_inf;
  for (auto id : rs.params.stop_token_ids)
    if (id >= 0 && static_cast<size_t>(id) < logits.size() &&
        !(rs.matcher && std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end()))
      logits[id] = neg_inf;
}

void engine::append_token(request_state& rs, const sampled_token& t, request_output& out) {
  rs.seq.tokens.push_back(t.token);
  out.tokens.push_back(t.token);
  if (rs.params.logprobs)
    out.logprobs.push_back(t);
  ++stats_.tokens_generated;
  const auto& p = rs.params;
  const int32_t n_out = rs.output_len();

  // Stop tokens (EOS counts unless ignore_eos). Before min_tokens they
  // cannot be sampled at all (see mask_early_stops).
  const bool stop_token =
    (!p.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), t.token) != eos_ids_.end()) ||
    std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), t.token) != p.stop_token_ids.end();

  if (rs.detok) {
    rs.text += rs.detok->push(t.token);
    if (!p.stop.empty() && n_out >= p.min_tokens) {
      // A stop string can only newly appear in the unemitted tail.
      size_t from = rs.emitted;
      size_t best = std::string::npos;
      std::string which;
      for (const auto& s : p.stop) {
        size_t pos = rs.text.find(s, from);
        if (pos != std::string::npos && pos < best) {
          best = pos;
          which = s;
        }
      }
      if (best != std::string::npos) {
        rs.text.resize(best);
        out.stop_reason = which;
        finish(rs, finish_reason::stop, out);
        return;
      }
    }
  }
  if (stop_token) {
    if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), t.token) != p.stop_token_ids.end())
      out.stop_token = t.token;
    if (rs.detok)
      rs.text += rs.detok->finish();
    finish(rs, finish_reason::stop, out);
    return;
  }
  if (n_out >= p.max_tokens || rs.seq.length() >= max_model_len_) {
    finish(rs, finish_reason::length, out);
    return;
  }
  if (rs.detok) {
    // Hold back what could still become the start of a stop string.
    const size_t upto = ready_text_end(rs.text, rs.emitted, rs.max_stop_len);
    if (upto > rs.emitted) {
      out.text += rs.text.substr(rs.emitted, upto - rs.emitted);
      rs.emitted = upto;
    }
  }
}

std::vector<request_output> engine::step() {
  std::vector<request_output> outputs;
  propose_drafts();
  auto plan = scheduler_->schedule();
  stats_.preemptions += plan.preempted.size();
  if (plan.seqs.empty())
    return outputs;
  for (const auto& c : plan.copies)
    backend_->copy_block(c.src, c.dst);

  std::vector<forward_seq> batch;
  batch.reserve(plan.seqs.size());
  size_t n_logits = 0;
  for (const auto& s : plan.seqs) {
    forward_seq f;
    f.tokens = std::span{s.seq->tokens}.subspan(s.seq->num_computed, s.num_tokens);
    f.start_pos = s.seq->num_computed;
    f.block_table = s.seq->blocks;
    // The scheduler keeps only the drafts it scheduled, so a sequence with
    // drafts computes its last real token and all of them.
    const bool last = s.seq->num_computed + s.num_tokens == s.seq->length();
    TESSERA_ASSERT(last || s.seq->num_draft == 0, "drafts are scheduled whole");
    f.logits_rows = last ? 1 + s.seq->num_draft : 0;
    n_logits += static_cast<size_t>(f.logits_rows);
    batch.push_back(f);
  }
  const size_t vocab = static_cast<size_t>(backend_->logits_vocab());
  logits_.resize(n_logits * vocab);
  backend_->forward(batch, logits_.data());
  // How much of each newly admitted prompt came from the prefix cache.
  for (const auto& s : plan.seqs) {
    auto& rs = *find(s.seq->id);
    if (rs.cached_prompt_tokens < 0)
      rs.cached_prompt_tokens = std::min(s.seq->num_computed, s.seq->prompt_len);
  }
  scheduler_->commit(plan);
  ++stats_.steps;
  stats_.tokens_computed += static_cast<uint64_t>(plan.total_tokens);

  size_t row = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    if (batch[i].logits_rows == 0)
      continue;
    sequence* seq = plan.seqs[i].seq;
    auto& rs = *find(seq->id);
    request_output out;
    out.id = seq->id;
    if (seq->num_draft > 0)
      verify_drafts(rs, row, out);
    else
      emit_row(rs, std::span{logits_}.subspan(row * vocab, vocab), out);
    row += static_cast<size_t>(batch[i].logits_rows);
    out.prompt_tokens = seq->prompt_len;
    out.cached_prompt_tokens = rs.cached_prompt_tokens;
    out.output_tokens = rs.output_len();
    outputs.push_back(std::move(out));
  }
  std::erase_if(requests_, [](const auto& kv) {
    return kv.second->seq.state == sequence_state::finished && !kv.second->keep_kv;
  });
  return outputs;
}

bool engine::emit_row(request_state& rs, std::span<float> row, request_output& out) {
  mask_early_stops(rs, row);
  if (rs.matcher && structured_->mask(*rs.matcher, row) == 0) {
    // Nothing continues the document (a vocabulary without the bytes it
    // needs): end here rather than sample from nothing.
    finish(rs, finish_reason::stop, out);
    return false;
  }
  const auto step = static_cast<uint64_t>(rs.output_len());
  auto t = sample(row, rs.params, rs.seed, step, rs.prompt(), rs.output(), scratch_);
  // A token after which the document could not be completed within the
  // tokens left is drawn again, at the same seed and step, from the tokens
  // that fit (rare: the bounded mask walks the whole vocabulary). The
  // prefill half of a disaggregated request (continues_elsewhere) has the
  // decode worker's budget ahead of it, not its own max_tokens of 1.
  if (t && rs.matcher && !rs.continues_elsewhere) {
    const int32_t left = rs.params.max_tokens - rs.output_len();
    if (!structured_->fits(*rs.matcher, t->token, left)) {
      structured_->mask_bounded(*rs.matcher, left, row);
      t = sample(row, rs.params, rs.seed, step, rs.prompt(), rs.output(), scratch_);
    }
  }
  if (!t) {
    fail(rs, t.error(), out);
    return false;
  }
  if (rs.matcher) {
    const bool ok = structured_->accept(*rs.matcher, t->token);
    TESSERA_ASSERT(ok, "the sampler picks only tokens the grammar mask allows");
  }
  append_token(rs, *t, out);
  return true;
}

std::optional<request_output> engine::abort(uint64_t id) {
  auto* rs = find(id);
  if (rs == nullptr)
    return std::nullopt;
  request_output out;
  out.id = id;
  out.prompt_tokens = rs->seq.prompt_len;
  out.output_tokens = rs->output_len();
  if (rs->seq.state != sequence_state::finished)
    finish(*rs, finish_reason::abort, out);
  else
    scheduler_->remove(&rs->seq); // a held request: drop its blocks
  requests_.erase(id);
  return out;
}

bool engine::release_request(uint64_t id) {
  auto* rs = find(id);
  if (rs == nullptr || rs->seq.state != sequence_state::finished)
    return false;
  scheduler_->remove(&rs->seq);
  requests_.erase(id);
  return true;
}

caf::error engine::fork_request(uint64_t parent_id, uint64_t child_id,
                                const sampling_params& params) {
  auto* parent = find(parent_id);
  if (parent == nullptr || parent->seq.state == sequence_state::finished ||
      parent->reserved_import)
    return make_engine_error(engine_errc::unknown_request,
                             "no unfinished request " + std::to_string(parent_id) + " to fork");
  request r;
  r.id = child_id;
  r.params = params;
  r.priority = parent->seq.priority;
  r.cache_salt = parent->cache_salt;
  if (auto err = check_new(r, parent->seq.length()))
    return err;
  std::optional<grammar::grammar_matcher> matcher;
  if (params.structured_output.active()) {
    auto m = structured_->start(params.structured_output, parent->output());
    if (!m)
      return std::move(m.error());
    matcher = std::move(*m);
  }
  // A copy: the parent must not change while the child is set up.
  const sequence src = parent->seq;
  auto& child = insert(std::move(r));
  child.seq.tokens = src.tokens;
  child.seq.prompt_len = src.prompt_len;
  child.seq.hashes = src.hashes;
  child.seq.num_computed = src.num_computed;
  child.seq.num_cached_blocks = src.num_cached_blocks;
  const int32_t used = scheduler_->blocks_for(src.num_computed);
  for (int32_t i = 0; i < used; ++i) {
    cache_->retain(src.blocks[i]);
    child.seq.blocks.push_back(src.blocks[i]);
  }
  if (child.seq.num_uncomputed() == 0) {
    // Nothing left to compute means no logits to sample from: recompute the
    // last token (its block is shared, so this copies it on write).
    --child.seq.num_computed;
    child.seq.num_cached_blocks = std::min(child.seq.num_cached_blocks,
                                           child.seq.num_computed / cache_->block_tokens());
  }
  child.matcher = std::move(matcher);
  prime_text(child);
  scheduler_->add(&child.seq);
  return {};
}

caf::expected<kv_export_blocks> engine::export_request_blocks(uint64_t id) const {
  auto* rs = find(id);
  if (rs == nullptr)
    return make_engine_error(engine_errc::unknown_request, "no request " + std::to_string(id) + " to export");
  if (rs->reserved_import)
    return make_engine_error(engine_errc::unknown_request,
                             "request " + std::to_string(id) +
                               " is a reserved import whose KV has not been committed");
  const auto& seq = rs->seq;
  const auto& layout = backend_->layout();
  kv_export_blocks out;
  kv_export& e = out.meta;
  e.model_fingerprint = backend_->model_fingerprint();
  e.layout = layout;
  e.tokens = seq.tokens;
  e.prompt_len = seq.prompt_len;
  e.num_computed = seq.num_computed;
  e.seed = rs->seed;
  const auto n_full = static_cast<size_t>(seq.num_computed / layout.block_tokens);
  std::vector<kv_block_hash> hashes = seq.hashes;
  kv_hash_blocks(cfg_.hash_key, seq.hash_root, seq.tokens, layout.block_tokens, n_full, hashes);
  hashes.resize(n_full);
  e.block_hashes = std::move(hashes);
  const int32_t n_blocks = scheduler_->blocks_for(seq.num_computed);
  TESSERA_ASSERT(static_cast<int32_t>(seq.blocks.size()) >= n_blocks,
                 "a request's blocks cover its computed tokens");
  out.blocks.assign(seq.blocks.begin(), seq.blocks.begin() + n_blocks);
  return out;
}

caf::expected<kv_export> engine::export_request(uint64_t id) const {
  auto eb = export_request_blocks(id);
  if (!eb)
    return std::move(eb.error());
  kv_export e = std::move(eb->meta);
  const size_t bb = e.layout.block_bytes();
  e.data.resize(eb->blocks.size() * bb);
  for (size_t i = 0; i < eb->blocks.size(); ++i)
    backend_->read_block(eb->blocks[i], std::span{e.data}.subspan(i * bb, bb));
  return e;
}

caf::error engine::check_import(const request& r, const kv_export& kv) const {
  auto mismatch = [](std::string what) { return make_engine_error(engine_errc::kv_mismatch, std::move(what)); };
  const auto& layout = backend_->layout();
  if (kv.model_fingerprint != backend_->model_fingerprint())
    return mismatch("the KV export comes from a different model");
  if (!(kv.layout == layout))
    return mismatch("the KV export's block layout (" + describe(kv.layout) +
                    ") differs from this engine's (" + describe(layout) + ")");
  const int32_t len = static_cast<int32_t>(kv.tokens.size());
  if (kv.prompt_len <= 0 || kv.prompt_len > len || kv.num_computed < 0 || kv.num_computed >= len)
    return mismatch("the KV export's token counts are inconsistent (tokens " + std::to_string(len) +
                    ", prompt " + std::to_string(kv.prompt_len) + ", computed " +
                    std::to_string(kv.num_computed) + ")");
  const int32_t vocab = backend_->config().vocab_size;
  for (auto t : kv.tokens)
    if (t < 0 || t >= vocab)
      return mismatch("the KV export holds token id " + std::to_string(t) + " outside the vocabulary");
  std::vector<kv_block_hash> expect;
  kv_hash_blocks(cfg_.hash_key, kv_hash_root(cfg_.hash_key, hash_seed_, r.cache_salt), kv.tokens, layout.block_tokens,
                 static_cast<size_t>(kv.num_computed / layout.block_tokens), expect);
  if (expect != kv.block_hashes)
    return mismatch("the KV export's block hashes do not match its tokens");
  if (len - kv.prompt_len >= r.params.max_tokens)
    return make_engine_error(engine_errc::bad_request, "the imported request already generated max_tokens");
  return check_new(r, kv.prompt_len);
}

caf::expected<kv_import_plan> engine::reserve_import(request r, const kv_export& meta) {
  if (auto err = check_import(r, meta))
    return err;
  return reserve_checked(std::move(r), meta);
}

caf::expected<kv_import_plan> engine::reserve_checked(request r, const kv_export& meta) {
  // The grammar state is the request's: rebuilt here from the schema and
  // the output the exporting engine (or the failed worker) produced.
  std::optional<grammar::grammar_matcher> matcher;
  if (r.params.structured_output.active()) {
    auto m = structured_->start(r.params.structured_output,
                                std::span{meta.tokens}.subspan(static_cast<size_t>(meta.prompt_len)));
    if (!m)
      return std::move(m.error());
    matcher = std::move(*m);
  }
  const int32_t bt = backend_->layout().block_tokens;
  const int32_t n_blocks = scheduler_->blocks_for(meta.num_computed);
  // Full blocks this engine already holds need no bytes (check_import made
  // sure the hashes name these tokens under r's cache salt). Only full
  // blocks have hashes, so the partial last block is always fresh.
  std::vector<kv_block_id> blocks;
  const size_t hits = cache_->match_prefix(meta.block_hashes, blocks);
  std::vector<kv_block_id> fresh;
  if (!cache_->allocate(n_blocks - static_cast<int32_t>(hits), fresh)) {
    cache_->free_blocks(blocks);
    return make_engine_error(engine_errc::no_free_blocks,
                             "no free KV blocks for the imported request (" +
                               std::to_string(n_blocks - static_cast<int32_t>(hits)) + " needed, " +
                               std::to_string(cache_->num_free_blocks()) + " free)");
  }
  cache_->record_prefix_query(meta.block_hashes.size() * static_cast<uint64_t>(bt),
                              hits * static_cast<uint64_t>(bt));
  blocks.insert(blocks.end(), fresh.begin(), fresh.end());

  r.params.seed = meta.seed;
  auto& rs = insert(std::move(r));
  rs.matcher = std::move(matcher);
  rs.reserved_import = true;
  rs.seq.tokens = meta.tokens;
  rs.seq.prompt_len = meta.prompt_len;
  rs.seq.num_computed = meta.num_computed;
  rs.seq.blocks = blocks;
  rs.seq.hashes = meta.block_hashes;
  // Nothing is offered to the prefix cache before commit_import: the fresh
  // blocks hold no data yet.
  rs.seq.num_cached_blocks = 0;
  rs.cached_prompt_tokens = std::min(meta.num_computed, meta.prompt_len);

  kv_import_plan plan;
  plan.request_id = rs.seq.id;
  plan.blocks = std::move(blocks);
  plan.needs_data.assign(plan.blocks.size(), 1);
  std::fill_n(plan.needs_data.begin(), hits, uint8_t{0});
  return plan;
}

caf::error engine::commit_import(uint64_t id) {
  auto* rs = find(id);
  if (rs == nullptr || !rs->reserved_import)
    return make_engine_error(engine_errc::unknown_request,
                             "no reserved import " + std::to_string(id) + " to commit");
  // Bytes written straight into the pool are checked before anything reads
  // them: an int8 block's scales must be finite and >= 0.
  if (auto pool = std::as_const(*backend_).kv_pool_memory(); !pool.empty()) {
    const size_t bb = backend_->layout().block_bytes();
    for (size_t i = 0; i < rs->seq.blocks.size(); ++i)
      if (auto bad = check_kv_block(backend_->layout(), pool.subspan(static_cast<size_t>(rs->seq.blocks[i]) * bb, bb)))
        return make_engine_error(engine_errc::kv_mismatch, "imported block " + std::to_string(i) + ": " + *bad);
  }
  rs->reserved_import = false;
  scheduler_->cache_full_blocks(rs->seq);
  prime_text(*rs);
  scheduler_->add(&rs->seq);
  return {};
}

bool engine::cancel_import(uint64_t id) {
  auto* rs = find(id);
  if (rs == nullptr || !rs->reserved_import)
    return false;
  scheduler_->remove(&rs->seq);
  requests_.erase(id);
  return true;
}

caf::error engine::import_request(request r, const kv_export& kv) {
  if (auto err = check_import(r, kv))
    return err;
  const size_t bb = backend_->layout().block_bytes();
  const size_t n_blocks = static_cast<size_t>(scheduler_->blocks_for(kv.num_computed));
  if (kv.data.size() != n_blocks * bb)
    return make_engine_error(engine_errc::kv_mismatch,
                             "the KV export carries " + std::to_string(kv.data.size()) +
                               " bytes, expected " + std::to_string(n_blocks * bb));
  for (size_t i = 0; i < n_blocks; ++i)
    if (auto bad = check_kv_block(backend_->layout(), std::span{kv.data}.subspan(i * bb, bb)))
      return make_engine_error(engine_errc::kv_mismatch, "the KV export's block " + std::to_string(i) + ": " + *bad);
  auto plan = reserve_checked(std::move(r), kv);
  if (!plan)
    return std::move(plan.error());
  for (size_t i = 0; i < n_blocks; ++i)
    if (plan->needs_data[i] != 0)
      backend_->write_block(plan->blocks[i], std::span{kv.data}.subspan(i * bb, bb));
  auto err = commit_import(plan->request_id);
  TESSERA_ASSERT(!err, "a just-reserved import commits");
  return {};
}

bool engine::has_unfinished() const { return num_unfinished() > 0; }

size_t engine::num_unfinished() const {
  // Waiting and running sequences are exactly the scheduler's (held and
  // reserved requests are not in its queues).
  return scheduler_->num_waiting() + scheduler_->num_running();
}

void engine::record_kv_events(bool on) {
  cache_->record_events(on);
}

std::vector<kv_cache_event> engine::drain_kv_events() {
  return cache_->drain_events();
}

std::vector<kv_block_hash> engine::cached_block_hashes() const {
  return cache_->cached_hashes();
}

size_t engine::num_reserved_imports() const {
  return static_cast<size_t>(std::count_if(requests_.begin(), requests_.end(), [](const auto& kv) {
    return kv.second->reserved_import;
  }));
}

engine_stats engine::stats() const {
  auto s = stats_;
  s.num_blocks = cache_->num_blocks();
  s.free_blocks = cache_->num_free_blocks();
  s.cache = cache_->stats();
  return s;
}

} // namespace tessera::engine
