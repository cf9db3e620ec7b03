#pragma once
// Sample wire messages with non-trivial content for the transport tests,
// and field-by-field comparisons (the engine's structs have no operator==).

#include <gtest/gtest.h>

#include <vector>

#include "transport/wire/messages.hpp"

namespace tessera::transport::wire::test {

/// Every field set to a non-default value, KV export included.
inline request_handoff full_handoff() {
  request_handoff m;
  auto& r = m.request;
  r.id = 0x1234'5678'9abc'def0ull;
  for (int32_t i = 0; i < 40; ++i)
    r.prompt.push_back(1000 + i * 7);
  auto& p = r.params;
  p.temperature = 0.7f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.repetition_penalty = 1.1f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = -0.5f;
  p.seed = 42;
  p.max_tokens = 100;
  p.min_tokens = 5;
  p.stop_token_ids = {7, 9, 11};
  p.stop = {"\n\n", "END", "stop here"};
  p.ignore_eos = true;
  p.logprobs = 5;
  r.priority = -3;
  r.cache_salt = "tenant-a";
  r.keep_kv = true;
  kv_export_info kv;
  kv.model_fingerprint = 0xfeed'beef'cafe'f00dull;
  kv.layout = {16, 2, 4, 64, engine::dtype::f16};
  kv.tokens = r.prompt;
  kv.tokens.push_back(5);
  kv.prompt_len = 40;
  kv.num_computed = 40;
  kv.seed = 42;
  kv.block_hashes = {0x1111ull, 0x2222'3333'4444'5555ull};
  m.kv = kv;
  return m;
}

/// Defaults everywhere (seed and logprobs unset, no KV export).
inline request_handoff minimal_handoff() {
  request_handoff m;
  m.request.id = 1;
  m.request.prompt = {0};
  return m;
}

inline token_chunk chunk_with_logprobs() {
  token_chunk m;
  m.id = 77;
  m.tokens = {10, 20, 30};
  for (int32_t t : m.tokens) {
    engine::sampled_token s;
    s.token = t;
    s.logprob = -0.25f * static_cast<float>(t);
    s.top_logprobs = {{t, s.logprob}, {t + 1, s.logprob - 1.0f}};
    m.logprobs.push_back(s);
  }
  m.text = "héllo wörld";
  m.finish = engine::finish_reason::stop;
  m.stop_reason = "</s>";
  m.prompt_tokens = 120;
  m.cached_prompt_tokens = 64;
  m.output_tokens = 3;
  return m;
}

inline token_chunk plain_chunk() {
  token_chunk m;
  m.id = 78;
  m.tokens = {42};
  m.text = "x";
  m.prompt_tokens = 5;
  m.output_tokens = 1;
  return m;
}

inline kv_transfer_batch sample_batch() {
  kv_transfer_batch m;
  m.batch_id = 9;
  m.request_id = 77;
  m.model_fingerprint = 0xabcdefull;
  m.layout = {16, 4, 8, 128, engine::dtype::bf16};
  const uint64_t bb = m.layout.block_bytes();
  for (uint32_t i = 0; i < 3; ++i)
    m.blocks.push_back({0x100ull + i, i == 2 ? 5 : 16, i * bb, bb, 3, (10 + i) * bb,
                        0xc0ffee00ull + i});
  return m;
}

inline kv_event stored_event() {
  kv_event m;
  m.worker_id = 3;
  m.event_id = 1001;
  m.tier = kv_tier::g2_host;
  m.kind = kv_event_kind::stored;
  m.parent_hash = 0xaaaa'bbbbull;
  m.block_hashes = {1, 2, 3, 4};
  return m;
}

inline kv_event removed_event() {
  kv_event m;
  m.worker_id = 4;
  m.event_id = 1002;
  m.tier = kv_tier::g3_disk;
  m.kind = kv_event_kind::removed;
  m.block_hashes = {5};
  return m;
}

inline membership sample_membership() {
  membership m;
  m.change = membership_change::join;
  m.node_id = "node-7";
  m.address = "10.0.0.7:13337";
  m.roles = {node_role::prefill, node_role::decode, node_role::kvstore};
  m.join_token = "s3cret";
  return m;
}

inline heartbeat sample_heartbeat() {
  heartbeat m;
  m.node_id = "node-7";
  m.sequence = 12345;
  m.timestamp_us = 1'700'000'000'000'000ull;
  m.load = 0.75f;
  m.queue_depth = 17;
  m.kv_usage = {{kv_tier::g1_pool, 100, 1000}, {kv_tier::g3_disk, 0, 1ull << 40}};
  return m;
}

inline wire_error sample_error() {
  return {"engine", 7, "request 5: top_p must be in (0, 1], got 2"};
}

/// One of each kind and variant above, in a fixed order.
inline std::vector<wire_message> all_samples() {
  return {full_handoff(),     minimal_handoff(),    chunk_with_logprobs(), plain_chunk(),
          sample_batch(),     stored_event(),       removed_event(),       sample_membership(),
          sample_heartbeat(), sample_error()};
}

// ---------------------------------------------------------------------------
// Field-by-field equality (EXPECT_*, so a failure names the field).

inline void expect_same(const engine::sampling_params& a, const engine::sampling_params& b) {
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.top_p, b.top_p);
  EXPECT_EQ(a.min_p, b.min_p);
  EXPECT_EQ(a.repetition_penalty, b.repetition_penalty);
  EXPECT_EQ(a.frequency_penalty, b.frequency_penalty);
  EXPECT_EQ(a.presence_penalty, b.presence_penalty);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.max_tokens, b.max_tokens);
  EXPECT_EQ(a.min_tokens, b.min_tokens);
  EXPECT_EQ(a.stop_token_ids, b.stop_token_ids);
  EXPECT_EQ(a.stop, b.stop);
  EXPECT_EQ(a.ignore_eos, b.ignore_eos);
  EXPECT_EQ(a.logprobs, b.logprobs);
}

inline void expect_same(const request_handoff& a, const request_handoff& b) {
  EXPECT_EQ(a.request.id, b.request.id);
  EXPECT_EQ(a.request.prompt, b.request.prompt);
  expect_same(a.request.params, b.request.params);
  EXPECT_EQ(a.request.priority, b.request.priority);
  EXPECT_EQ(a.request.cache_salt, b.request.cache_salt);
  EXPECT_EQ(a.request.keep_kv, b.request.keep_kv);
  ASSERT_EQ(a.kv.has_value(), b.kv.has_value());
  if (!a.kv)
    return;
  EXPECT_EQ(a.kv->model_fingerprint, b.kv->model_fingerprint);
  EXPECT_TRUE(a.kv->layout == b.kv->layout);
  EXPECT_EQ(a.kv->tokens, b.kv->tokens);
  EXPECT_EQ(a.kv->prompt_len, b.kv->prompt_len);
  EXPECT_EQ(a.kv->num_computed, b.kv->num_computed);
  EXPECT_EQ(a.kv->seed, b.kv->seed);
  EXPECT_EQ(a.kv->block_hashes, b.kv->block_hashes);
}

inline void expect_same(const token_chunk& a, const token_chunk& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    EXPECT_EQ(a.logprobs[i].token, b.logprobs[i].token);
    EXPECT_EQ(a.logprobs[i].logprob, b.logprobs[i].logprob);
    ASSERT_EQ(a.logprobs[i].top_logprobs.size(), b.logprobs[i].top_logprobs.size());
    for (size_t j = 0; j < a.logprobs[i].top_logprobs.size(); ++j) {
      EXPECT_EQ(a.logprobs[i].top_logprobs[j].token, b.logprobs[i].top_logprobs[j].token);
      EXPECT_EQ(a.logprobs[i].top_logprobs[j].logprob, b.logprobs[i].top_logprobs[j].logprob);
    }
  }
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.finish, b.finish);
  EXPECT_EQ(a.stop_reason, b.stop_reason);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.cached_prompt_tokens, b.cached_prompt_tokens);
  EXPECT_EQ(a.output_tokens, b.output_tokens);
}

inline void expect_same(const kv_transfer_batch& a, const kv_transfer_batch& b) {
  EXPECT_EQ(a.batch_id, b.batch_id);
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.model_fingerprint, b.model_fingerprint);
  EXPECT_TRUE(a.layout == b.layout);
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    EXPECT_EQ(a.blocks[i].hash, b.blocks[i].hash);
    EXPECT_EQ(a.blocks[i].token_count, b.blocks[i].token_count);
    EXPECT_EQ(a.blocks[i].src_offset, b.blocks[i].src_offset);
    EXPECT_EQ(a.blocks[i].size_bytes, b.blocks[i].size_bytes);
    EXPECT_EQ(a.blocks[i].dst_region, b.blocks[i].dst_region);
    EXPECT_EQ(a.blocks[i].dst_offset, b.blocks[i].dst_offset);
    EXPECT_EQ(a.blocks[i].checksum, b.blocks[i].checksum);
  }
}

inline void expect_same(const kv_event& a, const kv_event& b) {
  EXPECT_EQ(a.worker_id, b.worker_id);
  EXPECT_EQ(a.event_id, b.event_id);
  EXPECT_EQ(a.tier, b.tier);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.parent_hash, b.parent_hash);
  EXPECT_EQ(a.block_hashes, b.block_hashes);
}

inline void expect_same(const membership& a, const membership& b) {
  EXPECT_EQ(a.change, b.change);
  EXPECT_EQ(a.node_id, b.node_id);
  EXPECT_EQ(a.address, b.address);
  EXPECT_EQ(a.roles, b.roles);
  EXPECT_EQ(a.join_token, b.join_token);
}

inline void expect_same(const heartbeat& a, const heartbeat& b) {
  EXPECT_EQ(a.node_id, b.node_id);
  EXPECT_EQ(a.sequence, b.sequence);
  EXPECT_EQ(a.timestamp_us, b.timestamp_us);
  EXPECT_EQ(a.load, b.load);
  EXPECT_EQ(a.queue_depth, b.queue_depth);
  ASSERT_EQ(a.kv_usage.size(), b.kv_usage.size());
  for (size_t i = 0; i < a.kv_usage.size(); ++i) {
    EXPECT_EQ(a.kv_usage[i].tier, b.kv_usage[i].tier);
    EXPECT_EQ(a.kv_usage[i].used_bytes, b.kv_usage[i].used_bytes);
    EXPECT_EQ(a.kv_usage[i].capacity_bytes, b.kv_usage[i].capacity_bytes);
  }
}

inline void expect_same(const wire_error& a, const wire_error& b) {
  EXPECT_EQ(a.category, b.category);
  EXPECT_EQ(a.code, b.code);
  EXPECT_EQ(a.message, b.message);
}

inline void expect_same(const wire_message& a, const wire_message& b) {
  ASSERT_EQ(a.index(), b.index());
  std::visit([&](const auto& x) { expect_same(x, std::get<std::decay_t<decltype(x)>>(b)); }, a);
}

} // namespace tessera::transport::wire::test
