#pragma once
// Sample wire messages with non-trivial content for the transport tests and
// the fuzzer's seed corpus. No test framework here (make_corpus uses it).

#include <vector>

#include "tests/support/block_hash_util.hpp"
#include "transport/wire/codec.hpp"
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
  kv.layout = {16, 2, 4, 64, protocol::dtype::f16};
  kv.tokens = r.prompt;
  kv.tokens.push_back(5);
  kv.prompt_len = 40;
  kv.num_computed = 40;
  kv.seed = 42;
  kv.block_hashes = {{0x1111ull, 0x9999ull}, {0x2222'3333'4444'5555ull, 0x6666'7777'8888'9999ull}};
  m.kv = kv;
  m.reply_to = {"frontend-0", "frontend"};
  m.decode_at = {"node-7", "decode-1"};
  m.kv_source = {"node-9", "kvstore"};
  m.kv_source_blocks = 2;
  return m;
}

/// A migrated request: the output its client already received.
inline request_handoff resumed_handoff() {
  request_handoff m;
  m.request.id = 9;
  m.request.prompt = {3, 1, 4, 1, 5};
  m.request.params.seed = 7;
  m.request.params.max_tokens = 12;
  m.reply_to = {"front", "frontend"};
  m.resume_output = {9, 2, 6};
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
    protocol::sampled_token s;
    s.token = t;
    s.logprob = -0.25f * static_cast<float>(t);
    s.top_logprobs = {{t, s.logprob}, {t + 1, s.logprob - 1.0f}};
    m.logprobs.push_back(s);
  }
  m.text = "héllo wörld";
  m.finish = protocol::finish_reason::stop;
  m.stop_reason = "</s>";
  m.stop_token = 2;
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
  m.layout = {16, 4, 8, 128, protocol::dtype::bf16};
  const uint64_t bb = m.layout.block_bytes();
  for (uint32_t i = 0; i < 3; ++i)
    m.blocks.push_back({::tessera::test::bh(0x100ull + i), i == 2 ? 5 : 16, i * bb, bb, 3, (10 + i) * bb,
                        0xc0ffee00ull + i});
  return m;
}

inline kv_event stored_event() {
  kv_event m;
  m.worker_id = 3;
  m.event_id = 1001;
  m.tier = kv_tier::g2_host;
  m.kind = kv_event_kind::stored;
  m.parent_hash = protocol::kv_block_hash{0xaaaa'bbbbull, 0xcccc'ddddull};
  m.block_hashes = ::tessera::test::bhs({1, 2, 3, 4});
  return m;
}

inline kv_event removed_event() {
  kv_event m;
  m.worker_id = 4;
  m.event_id = 1002;
  m.tier = kv_tier::g3_disk;
  m.kind = kv_event_kind::removed;
  m.block_hashes = ::tessera::test::bhs({5});
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

inline kv_grant sample_grant() {
  kv_grant m;
  m.request_id = 77;
  m.dst_region = 2;
  m.blocks = {{0, false}, {4096, true}, {1ull << 33, true}};
  return m;
}

/// A request carrying a whole handoff frame. (Encoding the inner frame here
/// keeps the samples free of a test framework: a failure yields an empty,
/// invalid payload that the tests then reject loudly.)
inline envelope request_envelope() {
  envelope m;
  m.kind = envelope_kind::request;
  m.call_id = 5;
  m.operation = "handoff";
  if (auto inner = encode(wire_message{minimal_handoff()}))
    m.payload = std::move(*inner);
  return m;
}

/// A response without a value.
inline envelope empty_response() {
  envelope m;
  m.kind = envelope_kind::response;
  m.call_id = 5;
  return m;
}

inline request_cancel sample_cancel() {
  return {77, "client disconnected"};
}

inline worker_join sample_join() {
  worker_join m;
  m.worker_id = 12;
  m.at = {"node-3", "worker-1"};
  m.roles = {node_role::prefill, node_role::decode};
  m.model_fingerprint = 0xfeedull;
  m.block_tokens = 16;
  m.num_blocks = 4096;
  m.hash_seed = 0x5eedull;
  m.units_a = 0.0797408;
  m.units_b = 1.26638;
  m.units_c = 0.5;
  m.units_d = 1.0645e-4;
  return m;
}

inline kv_fetch_request sample_fetch() {
  kv_fetch_request m;
  m.ns = 0x5eedull;
  m.block_hashes = ::tessera::test::bhs({0x11ull, 0x22ull, 0x33ull});
  m.max_bytes = 1 << 20;
  m.wait_ms = 2500;
  return m;
}

/// Two blocks of a small layout, with distinct bytes.
inline kv_fetch_reply sample_fetch_reply() {
  kv_fetch_reply m;
  m.layout = {4, 1, 1, 2, protocol::dtype::f32};
  for (uint64_t b = 0; b < 2; ++b) {
    kv_fetched_block k;
    k.hash = ::tessera::test::bh(0x11ull + b);
    k.token_count = 4;
    k.checksum = 0xc0ffeeull + b;
    for (size_t i = 0; i < m.layout.block_bytes(); ++i)
      k.data.push_back(static_cast<std::byte>(i * 3 + b));
    m.blocks.push_back(std::move(k));
  }
  m.more = true;
  return m;
}

/// One of each kind and variant above, in a fixed order.
inline std::vector<wire_message> all_samples() {
  return {full_handoff(),     minimal_handoff(), resumed_handoff(),     chunk_with_logprobs(), plain_chunk(),
          sample_batch(),     stored_event(),    removed_event(),       sample_membership(),
          sample_heartbeat(), sample_error(),    sample_grant(),        request_envelope(),
          empty_response(),  sample_cancel(),     sample_join(),         sample_fetch(),
          sample_fetch_reply()};
}

} // namespace tessera::transport::wire::test
