#pragma once
// Field-by-field comparison of wire messages (the engine's structs have no
// operator==); EXPECT_* so that a failure names the field.

#include <gtest/gtest.h>

#include "transport/wire/messages.hpp"

namespace tessera::transport::wire::test {

inline void expect_same(const protocol::sampling_params& a, const protocol::sampling_params& b) {
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

inline void expect_same(const worker_join& a, const worker_join& b) {
  EXPECT_EQ(a.worker_id, b.worker_id);
  EXPECT_EQ(a.at.node, b.at.node);
  EXPECT_EQ(a.at.actor, b.at.actor);
  EXPECT_EQ(a.roles, b.roles);
  EXPECT_EQ(a.model_fingerprint, b.model_fingerprint);
  EXPECT_EQ(a.block_tokens, b.block_tokens);
  EXPECT_EQ(a.num_blocks, b.num_blocks);
  EXPECT_EQ(a.hash_seed, b.hash_seed);
  EXPECT_EQ(a.units_a, b.units_a);
  EXPECT_EQ(a.units_b, b.units_b);
  EXPECT_EQ(a.units_c, b.units_c);
  EXPECT_EQ(a.units_d, b.units_d);
}

inline void expect_same(const request_cancel& a, const request_cancel& b) {
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.reason, b.reason);
}

inline void expect_same(const kv_fetch_request& a, const kv_fetch_request& b) {
  EXPECT_EQ(a.ns, b.ns);
  EXPECT_EQ(a.block_hashes, b.block_hashes);
  EXPECT_EQ(a.max_bytes, b.max_bytes);
  EXPECT_EQ(a.wait_ms, b.wait_ms);
}

inline void expect_same(const kv_fetch_reply& a, const kv_fetch_reply& b) {
  EXPECT_TRUE(a.layout == b.layout);
  EXPECT_EQ(a.more, b.more);
  EXPECT_EQ(a.busy, b.busy);
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    EXPECT_EQ(a.blocks[i].hash, b.blocks[i].hash);
    EXPECT_EQ(a.blocks[i].token_count, b.blocks[i].token_count);
    EXPECT_EQ(a.blocks[i].checksum, b.blocks[i].checksum);
    EXPECT_EQ(a.blocks[i].data, b.blocks[i].data);
  }
}

inline void expect_same(const request_handoff& a, const request_handoff& b) {
  EXPECT_EQ(a.kv_source.node, b.kv_source.node);
  EXPECT_EQ(a.kv_source.actor, b.kv_source.actor);
  EXPECT_EQ(a.kv_source_blocks, b.kv_source_blocks);
  EXPECT_EQ(a.resume_output, b.resume_output);
  EXPECT_EQ(a.reply_to.node, b.reply_to.node);
  EXPECT_EQ(a.reply_to.actor, b.reply_to.actor);
  EXPECT_EQ(a.decode_at.node, b.decode_at.node);
  EXPECT_EQ(a.decode_at.actor, b.decode_at.actor);
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
  EXPECT_EQ(a.stop_token, b.stop_token);
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

inline void expect_same(const kv_grant& a, const kv_grant& b) {
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.dst_region, b.dst_region);
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    EXPECT_EQ(a.blocks[i].dst_offset, b.blocks[i].dst_offset);
    EXPECT_EQ(a.blocks[i].needs_data, b.blocks[i].needs_data);
  }
}

inline void expect_same(const envelope& a, const envelope& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.call_id, b.call_id);
  EXPECT_EQ(a.operation, b.operation);
  EXPECT_EQ(a.payload, b.payload);
}

inline void expect_same(const client_submit& a, const client_submit& b) {
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.client, b.client);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.prompt_ids, b.prompt_ids);
  EXPECT_EQ(a.prompt_text, b.prompt_text);
  ASSERT_EQ(a.messages.size(), b.messages.size());
  for (size_t i = 0; i < a.messages.size(); ++i) {
    EXPECT_EQ(a.messages[i].role, b.messages[i].role);
    EXPECT_EQ(a.messages[i].content, b.messages[i].content);
  }
  expect_same(a.params, b.params);
  EXPECT_EQ(a.priority, b.priority);
  EXPECT_EQ(a.api_key, b.api_key);
  EXPECT_EQ(a.detokenize, b.detokenize);
}

inline void expect_same(const client_accepted& a, const client_accepted& b) {
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.prompt_token_ids, b.prompt_token_ids);
  EXPECT_EQ(a.model, b.model);
}

inline void expect_same(const client_cancel& a, const client_cancel& b) {
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.client, b.client);
}

inline void expect_same(const cluster_info& a, const cluster_info& b) {
  EXPECT_EQ(a.models, b.models);
  EXPECT_EQ(a.ready, b.ready);
  EXPECT_EQ(a.healthy_workers, b.healthy_workers);
  EXPECT_EQ(a.workers, b.workers);
  EXPECT_EQ(a.max_model_len, b.max_model_len);
  EXPECT_EQ(a.draining, b.draining);
}

inline void expect_same(const client_failed& a, const client_failed& b) {
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.code, b.code);
  EXPECT_EQ(a.http_status, b.http_status);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.error_code, b.error_code);
  EXPECT_EQ(a.param, b.param);
  EXPECT_EQ(a.message, b.message);
}

inline void expect_same(const wire_message& a, const wire_message& b) {
  ASSERT_EQ(a.index(), b.index());
  std::visit([&](const auto& x) { expect_same(x, std::get<std::decay_t<decltype(x)>>(b)); }, a);
}

} // namespace tessera::transport::wire::test
