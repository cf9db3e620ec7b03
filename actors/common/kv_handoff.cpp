#include "actors/common/kv_handoff.hpp"

#include <string>

#include "engine/block_hash.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::actors {

namespace wire = transport::wire;
using engine::engine_errc;
using engine::make_engine_error;

namespace {

wire::kv_export_info to_info(const engine::kv_export& e) {
  return {e.model_fingerprint, e.layout,      e.tokens,      e.prompt_len,
          e.num_computed,      e.seed,        e.block_hashes};
}

engine::kv_export from_info(const wire::kv_export_info& i) {
  engine::kv_export e;
  e.model_fingerprint = i.model_fingerprint;
  e.layout = i.layout;
  e.tokens = i.tokens;
  e.prompt_len = i.prompt_len;
  e.num_computed = i.num_computed;
  e.seed = i.seed;
  e.block_hashes = i.block_hashes;
  return e;
}

// Tokens stored in exported block i of an export of `num_computed` tokens.
int32_t block_token_count(size_t i, int32_t num_computed, int32_t block_tokens) {
  const auto start = static_cast<int32_t>(i) * block_tokens;
  return std::min(block_tokens, num_computed - start);
}

} // namespace

wire::request_handoff make_handoff(const engine::request& r, const engine::kv_export_blocks& src) {
  wire::request_handoff h;
  h.request = r;
  h.request.keep_kv = false;
  h.kv = to_info(src.meta);
  return h;
}

caf::expected<wire::kv_grant> grant_handoff(engine::engine& eng, const wire::request_handoff& h,
                                            transport::region_id pool_region) {
  if (!h.kv)
    return make_engine_error(engine_errc::bad_request,
                             "request " + std::to_string(h.request.id) + ": a hand-off without KV");
  if (eng.get_backend().kv_pool_memory().empty())
    return make_engine_error(engine_errc::kv_mismatch,
                             "this engine's KV pool is not host memory; it cannot receive puts");
  auto plan = eng.reserve_import(h.request, from_info(*h.kv));
  if (!plan)
    return plan.error();
  const uint64_t bb = eng.get_backend().layout().block_bytes();
  wire::kv_grant g;
  g.request_id = plan->request_id;
  g.dst_region = pool_region;
  for (size_t i = 0; i < plan->blocks.size(); ++i)
    g.blocks.push_back({static_cast<uint64_t>(plan->blocks[i]) * bb, plan->needs_data[i] != 0});
  return g;
}

caf::expected<kv_put_plan> plan_puts(const engine::engine& eng, const engine::kv_export_blocks& src,
                                     transport::region_id src_region, const wire::kv_grant& grant,
                                     uint64_t batch_id) {
  const auto& meta = src.meta;
  const std::string what = "request " + std::to_string(grant.request_id);
  if (grant.blocks.size() != src.blocks.size())
    return make_engine_error(engine_errc::kv_mismatch,
                             what + ": the grant has " + std::to_string(grant.blocks.size()) +
                               " blocks for an export of " + std::to_string(src.blocks.size()));
  auto pool = eng.get_backend().kv_pool_memory();
  if (pool.empty())
    return make_engine_error(engine_errc::kv_mismatch,
                             "this engine's KV pool is not host memory; it cannot put blocks");
  const uint64_t bb = meta.layout.block_bytes();
  kv_put_plan out;
  out.batch.batch_id = batch_id;
  auto& d = out.descriptor;
  d.batch_id = batch_id;
  d.request_id = grant.request_id;
  d.model_fingerprint = meta.model_fingerprint;
  d.layout = meta.layout;
  for (size_t i = 0; i < src.blocks.size(); ++i) {
    const uint64_t src_offset = static_cast<uint64_t>(src.blocks[i]) * bb;
    const auto& to = grant.blocks[i];
    wire::kv_block_descriptor b;
    b.hash = i < meta.block_hashes.size() ? meta.block_hashes[i] : engine::kv_block_hash{};
    b.token_count = block_token_count(i, meta.num_computed, meta.layout.block_tokens);
    b.src_offset = src_offset;
    b.size_bytes = bb;
    b.dst_region = grant.dst_region;
    b.dst_offset = to.dst_offset;
    if (to.needs_data) {
      b.checksum = engine::hash_bytes(pool.data() + src_offset, bb);
      out.batch.blocks.push_back({src_region, src_offset, grant.dst_region, to.dst_offset, bb});
    }
    d.blocks.push_back(b);
  }
  return out;
}

caf::error commit_handoff(engine::engine& eng, const wire::kv_grant& grant,
                          const wire::kv_transfer_batch& d) {
  const std::string what = "request " + std::to_string(d.request_id);
  auto fail = [&](const std::string& why) {
    (void) eng.cancel_import(d.request_id);
    return make_engine_error(engine_errc::kv_mismatch, what + ": " + why);
  };
  if (d.request_id != grant.request_id)
    return fail("the transfer is for request " + std::to_string(d.request_id) +
                ", the grant for " + std::to_string(grant.request_id));
  if (d.blocks.size() != grant.blocks.size())
    return fail("the transfer describes " + std::to_string(d.blocks.size()) + " blocks, " +
                std::to_string(grant.blocks.size()) + " were granted");
  auto pool = eng.get_backend().kv_pool_memory();
  const uint64_t bb = eng.get_backend().layout().block_bytes();
  for (size_t i = 0; i < d.blocks.size(); ++i) {
    const auto& b = d.blocks[i];
    const auto& g = grant.blocks[i];
    const std::string at = "block " + std::to_string(i);
    if (b.dst_region != grant.dst_region || b.dst_offset != g.dst_offset || b.size_bytes != bb)
      return fail(at + " was not put where it was granted");
    if (!g.needs_data)
      continue;
    if (b.dst_offset + bb > pool.size())
      return fail(at + " lies outside the pool");
    if (engine::hash_bytes(pool.data() + b.dst_offset, bb) != b.checksum)
      return fail(at + " arrived with a checksum mismatch");
  }
  if (auto err = eng.commit_import(d.request_id))
    return err;
  return {};
}

} // namespace tessera::actors
