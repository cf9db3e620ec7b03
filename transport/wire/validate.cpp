#include "transport/wire/validate.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "transport/transport_errc.hpp"
#include "transport/wire/frame.hpp"

namespace tessera::transport::wire {

namespace {

using std::to_string;

// Each check returns a message (empty = fine); validate() prefixes the
// message kind and wraps it into one error code.
using problem = std::string;

problem too_long(const char* field, size_t got, size_t max, const char* unit) {
  return std::string(field) + " has " + to_string(got) + " " + unit + ", more than the maximum " +
         to_string(max);
}

/// `field` must be finite and >= 0 (a load, model units).
template <class Number>
problem check_non_negative(const char* field, Number v) {
  if (std::isfinite(v) && v >= 0)
    return {};
  return std::string{field} + " must be finite and >= 0, got " + to_string(v);
}

problem check_layout(const protocol::kv_layout& l) {
  auto in = [](int32_t v, int32_t lo, int32_t hi) { return lo <= v && v <= hi; };
  if (!in(l.block_tokens, 1, 4096))
    return "layout.block_tokens must be in [1, 4096], got " + to_string(l.block_tokens);
  if (!in(l.num_layers, 1, 4096))
    return "layout.num_layers must be in [1, 4096], got " + to_string(l.num_layers);
  if (!in(l.num_kv_heads, 1, 4096))
    return "layout.num_kv_heads must be in [1, 4096], got " + to_string(l.num_kv_heads);
  if (!in(l.head_dim, 1, 16384))
    return "layout.head_dim must be in [1, 16384], got " + to_string(l.head_dim);
  if (static_cast<unsigned>(l.kv_dtype) > static_cast<unsigned>(protocol::dtype::i8))
    return "layout.kv_dtype out of range: " + to_string(static_cast<unsigned>(l.kv_dtype));
  return {};
}

problem check_token_ids(const char* field, const std::vector<int32_t>& ids, size_t max) {
  if (ids.size() > max)
    return too_long(field, ids.size(), max, "tokens");
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0)
      return std::string(field) + "[" + to_string(i) + "] must be >= 0, got " + to_string(ids[i]);
  return {};
}

problem check_name(const char* field, const std::string& s, size_t max, bool required) {
  if (required && s.empty())
    return std::string(field) + " must not be empty";
  if (s.size() > max)
    return too_long(field, s.size(), max, "bytes");
  return {};
}

problem check_address(const std::string& field, const actor_address& a, const wire_limits& lim) {
  if (a.node.empty() != a.actor.empty())
    return field + ": node and actor must both be set or both be empty";
  if (auto p = check_name((field + ".node").c_str(), a.node, lim.max_name_bytes, false); !p.empty())
    return p;
  if (auto p = check_name((field + ".actor").c_str(), a.actor, 64, false); !p.empty())
    return p;
  return {};
}

problem check(const request_handoff& m, const wire_limits& lim) {
  const auto& r = m.request;
  if (r.prompt.empty() && !m.kv)
    return "prompt must not be empty (or a KV export must be given)";
  if (auto p = check_token_ids("prompt", r.prompt, lim.max_tokens); !p.empty())
    return p;
  if (auto err = r.params.validate())
    return "params: " + error_message(err);
  if (auto p = check_name("cache_salt", r.cache_salt, lim.max_name_bytes, false); !p.empty())
    return p;
  if (auto p = check_address("reply_to", m.reply_to, lim); !p.empty())
    return p;
  if (auto p = check_address("decode_at", m.decode_at, lim); !p.empty())
    return p;
  if (auto p = check_address("kv_source", m.kv_source, lim); !p.empty())
    return p;
  if (m.kv_source.empty() != (m.kv_source_blocks == 0))
    return "kv_source and kv_source_blocks must both be set or neither";
  if (m.kv_source_blocks < 0)
    return "kv_source_blocks must be >= 0, got " + to_string(m.kv_source_blocks);
  if (!m.resume_output.empty()) {
    if (auto p = check_token_ids("resume_output", m.resume_output, lim.max_tokens); !p.empty())
      return p;
    if (m.kv || !m.decode_at.empty())
      return "resume_output cannot come with kv or decode_at (a resumed request runs where it is sent)";
    if (r.prompt.empty())
      return "resume_output needs the request's prompt";
    if (static_cast<int64_t>(m.resume_output.size()) >= r.params.max_tokens)
      return "resume_output holds " + to_string(m.resume_output.size()) +
             " tokens, at or past params.max_tokens " + to_string(r.params.max_tokens);
  }
  if (!m.kv)
    return {};
  const auto& kv = *m.kv;
  if (auto p = check_layout(kv.layout); !p.empty())
    return "kv." + p;
  if (kv.tokens.empty())
    return "kv.tokens must not be empty";
  if (auto p = check_token_ids("kv.tokens", kv.tokens, lim.max_tokens); !p.empty())
    return p;
  const auto len = static_cast<int64_t>(kv.tokens.size());
  if (kv.prompt_len < 1 || kv.prompt_len > len)
    return "kv.prompt_len must be in [1, " + to_string(len) + "], got " + to_string(kv.prompt_len);
  if (kv.num_computed < 0 || kv.num_computed >= len)
    return "kv.num_computed must be in [0, " + to_string(len - 1) + "], got " +
           to_string(kv.num_computed);
  const auto want = static_cast<size_t>(kv.num_computed / kv.layout.block_tokens);
  if (kv.block_hashes.size() != want)
    return "kv.block_hashes must have num_computed / block_tokens = " + to_string(want) +
           " entries, got " + to_string(kv.block_hashes.size());
  return {};
}

problem check(const token_chunk& m, const wire_limits& lim) {
  if (auto p = check_token_ids("tokens", m.tokens, lim.max_chunk_tokens); !p.empty())
    return p;
  if (!m.logprobs.empty() && m.logprobs.size() != m.tokens.size())
    return "logprobs must be empty or have one entry per token (" + to_string(m.tokens.size()) +
           "), got " + to_string(m.logprobs.size());
  for (size_t i = 0; i < m.logprobs.size(); ++i) {
    const auto& lp = m.logprobs[i];
    const std::string at = "logprobs[" + to_string(i) + "]";
    if (lp.token != m.tokens[i])
      return at + ".token " + to_string(lp.token) + " differs from tokens[" + to_string(i) + "] " +
             to_string(m.tokens[i]);
    // -inf is a legitimate log-probability; NaN and positive values are not.
    if (!(lp.logprob <= 0.0f))
      return at + ".logprob must be <= 0, got " + to_string(lp.logprob);
    const auto max_top = static_cast<size_t>(protocol::sampling_params::max_logprobs);
    if (lp.top_logprobs.size() > max_top)
      return too_long((at + ".top_logprobs").c_str(), lp.top_logprobs.size(), max_top, "entries");
    for (size_t j = 0; j < lp.top_logprobs.size(); ++j) {
      const auto& t = lp.top_logprobs[j];
      if (t.token < 0 || !(t.logprob <= 0.0f))
        return at + ".top_logprobs[" + to_string(j) + "] must have token >= 0 and logprob <= 0";
    }
  }
  if (m.text.size() > lim.max_text_bytes)
    return too_long("text", m.text.size(), lim.max_text_bytes, "bytes");
  if (static_cast<unsigned>(m.finish) > static_cast<unsigned>(protocol::finish_reason::abort))
    return "finish_reason out of range: " + to_string(static_cast<unsigned>(m.finish));
  if (auto p = check_name("stop_reason", m.stop_reason, lim.max_name_bytes, false); !p.empty())
    return p;
  if (m.stop_token < -1 || (m.stop_token >= 0 && m.finish != protocol::finish_reason::stop))
    return "stop_token must be -1, or a token id on a chunk that finished with stop; got " +
           to_string(m.stop_token);
  if (m.prompt_tokens < 0 || m.output_tokens < 0)
    return "prompt_tokens and output_tokens must be >= 0, got " + to_string(m.prompt_tokens) +
           " and " + to_string(m.output_tokens);
  if (m.cached_prompt_tokens < 0 || m.cached_prompt_tokens > m.prompt_tokens)
    return "cached_prompt_tokens must be in [0, prompt_tokens (" + to_string(m.prompt_tokens) +
           ")], got " + to_string(m.cached_prompt_tokens);
  if (m.error) {
    if (m.finish != protocol::finish_reason::abort)
      return "error is set on a chunk whose finish_reason is not abort";
    const auto why = to_wire_error(m.error);
    // The category travels as a CAF atom: at most 10 characters.
    if (auto p = check_name("error.category", why.category, 10, true); !p.empty())
      return p;
    if (why.message.size() > lim.max_text_bytes)
      return too_long("error.message", why.message.size(), lim.max_text_bytes, "bytes");
  }
  return {};
}

problem check(const kv_transfer_batch& m, const wire_limits& lim) {
  if (auto p = check_layout(m.layout); !p.empty())
    return p;
  if (m.blocks.empty())
    return "blocks must not be empty";
  if (m.blocks.size() > lim.max_blocks_per_batch)
    return too_long("blocks", m.blocks.size(), lim.max_blocks_per_batch, "entries");
  const uint64_t block_bytes = m.layout.block_bytes();
  for (size_t i = 0; i < m.blocks.size(); ++i) {
    const auto& b = m.blocks[i];
    const std::string at = "blocks[" + to_string(i) + "]";
    if (b.token_count < 1 || b.token_count > m.layout.block_tokens)
      return at + ".token_count must be in [1, " + to_string(m.layout.block_tokens) + "], got " +
             to_string(b.token_count);
    if (b.size_bytes < 1 || b.size_bytes > block_bytes)
      return at + ".size_bytes must be in [1, " + to_string(block_bytes) + "], got " +
             to_string(b.size_bytes);
    if (b.src_offset > UINT64_MAX - b.size_bytes || b.dst_offset > UINT64_MAX - b.size_bytes)
      return at + ": offset + size_bytes overflows";
  }
  return {};
}

problem check_tier(const char* field, kv_tier t) {
  if (static_cast<unsigned>(t) > static_cast<unsigned>(kv_tier::g3_disk))
    return std::string(field) + " out of range: " + to_string(static_cast<unsigned>(t));
  return {};
}

problem check(const kv_event& m, const wire_limits& lim) {
  if (auto p = check_tier("tier", m.tier); !p.empty())
    return p;
  if (static_cast<unsigned>(m.kind) > static_cast<unsigned>(kv_event_kind::cleared))
    return "kind out of range: " + to_string(static_cast<unsigned>(m.kind));
  if (m.block_hashes.size() > lim.max_event_hashes)
    return too_long("block_hashes", m.block_hashes.size(), lim.max_event_hashes, "entries");
  if (m.kind != kv_event_kind::stored && m.parent_hash)
    return "parent_hash is only allowed on stored events";
  if (m.kind == kv_event_kind::cleared && !m.block_hashes.empty())
    return "a cleared event carries no block_hashes, got " + to_string(m.block_hashes.size());
  if (m.kind != kv_event_kind::cleared && m.block_hashes.empty())
    return "block_hashes must not be empty";
  return {};
}

problem check_roles(const std::vector<node_role>& roles) {
  unsigned seen = 0;
  for (size_t i = 0; i < roles.size(); ++i) {
    const auto r = static_cast<unsigned>(roles[i]);
    if (r > static_cast<unsigned>(node_role::kvstore))
      return "roles[" + to_string(i) + "] out of range: " + to_string(r);
    if (seen & (1u << r))
      return "roles[" + to_string(i) + "] repeats role " + to_string(r);
    seen |= 1u << r;
  }
  return {};
}

problem check(const membership& m, const wire_limits& lim) {
  if (static_cast<unsigned>(m.change) > static_cast<unsigned>(membership_change::update))
    return "change out of range: " + to_string(static_cast<unsigned>(m.change));
  if (auto p = check_name("node_id", m.node_id, lim.max_name_bytes, true); !p.empty())
    return p;
  if (auto p = check_name("address", m.address, lim.max_name_bytes, false); !p.empty())
    return p;
  if (auto p = check_name("join_token", m.join_token, lim.max_name_bytes, false); !p.empty())
    return p;
  return check_roles(m.roles);
}

problem check(const heartbeat& m, const wire_limits& lim) {
  if (auto p = check_name("node_id", m.node_id, lim.max_name_bytes, true); !p.empty())
    return p;
  if (auto p = check_non_negative("load", m.load); !p.empty())
    return p;
  if (auto p = check_non_negative("outstanding_units", m.outstanding_units); !p.empty())
    return p;
  if (auto p = check_non_negative("units_served", m.units_served); !p.empty())
    return p;
  unsigned seen = 0;
  for (size_t i = 0; i < m.kv_usage.size(); ++i) {
    const auto& u = m.kv_usage[i];
    const std::string at = "kv_usage[" + to_string(i) + "]";
    if (auto p = check_tier((at + ".tier").c_str(), u.tier); !p.empty())
      return p;
    const auto t = static_cast<unsigned>(u.tier);
    if (seen & (1u << t))
      return at + " repeats tier " + to_string(t);
    seen |= 1u << t;
    if (u.used_bytes > u.capacity_bytes)
      return at + ".used_bytes " + to_string(u.used_bytes) + " exceeds capacity_bytes " +
             to_string(u.capacity_bytes);
  }
  return {};
}

problem check(const wire_error& m, const wire_limits& lim) {
  if (auto p = check_name("category", m.category, lim.max_name_bytes, true); !p.empty())
    return p;
  if (m.message.size() > lim.max_text_bytes)
    return too_long("message", m.message.size(), lim.max_text_bytes, "bytes");
  return {};
}

problem check(const kv_grant& m, const wire_limits& lim) {
  if (m.blocks.empty())
    return "blocks must not be empty";
  if (m.blocks.size() > lim.max_blocks_per_batch)
    return too_long("blocks", m.blocks.size(), lim.max_blocks_per_batch, "entries");
  return {};
}

problem check(const worker_join& m, const wire_limits& lim) {
  if (m.at.node.empty() || m.at.actor.empty())
    return "at: node and actor must be set";
  if (auto p = check_address("at", m.at, lim); !p.empty())
    return p;
  if (m.roles.empty())
    return "roles must not be empty";
  if (auto p = check_roles(m.roles); !p.empty())
    return p;
  const bool store = m.roles == std::vector<node_role>{node_role::kvstore};
  for (size_t i = 0; i < m.roles.size() && !store; ++i)
    if (m.roles[i] != node_role::prefill && m.roles[i] != node_role::decode)
      return "roles[" + to_string(i) + "] must be prefill or decode (or kvstore alone)";
  if (m.block_tokens < 1 || m.block_tokens > 4096)
    return "block_tokens must be in [1, 4096], got " + to_string(m.block_tokens);
  if (m.num_blocks < 1)
    return "num_blocks must be >= 1, got " + to_string(m.num_blocks);
  const std::pair<const char*, double> units[] = {
    {"units_a", m.units_a}, {"units_b", m.units_b}, {"units_c", m.units_c}, {"units_d", m.units_d}};
  for (const auto& [name, v] : units)
    if (auto p = check_non_negative(name, v); !p.empty())
      return p;
  return {};
}

problem check(const request_cancel& m, const wire_limits& lim) {
  return check_name("reason", m.reason, lim.max_name_bytes, false);
}

problem check(const request_status& m, const wire_limits& lim) {
  if (m.request_ids.empty())
    return "request_ids must not be empty";
  if (m.request_ids.size() > lim.max_status_ids)
    return too_long("request_ids", m.request_ids.size(), lim.max_status_ids, "entries");
  return {};
}

problem check(const request_status_reply& m, const wire_limits& lim) {
  if (m.unknown_ids.size() > lim.max_status_ids)
    return too_long("unknown_ids", m.unknown_ids.size(), lim.max_status_ids, "entries");
  return {};
}

problem check(const route_call& m, const wire_limits& lim) {
  if (m.prompt.empty())
    return "prompt must not be empty";
  if (auto p = check_token_ids("prompt", m.prompt, lim.max_tokens); !p.empty())
    return p;
  if (auto p = check_name("cache_salt", m.cache_salt, lim.max_name_bytes, false); !p.empty())
    return p;
  if (auto p = check_name("session_id", m.session_id, lim.max_text_bytes, false); !p.empty())
    return p;
  if (m.max_tokens < 0)
    return "max_tokens must be >= 0, got " + to_string(m.max_tokens);
  if (m.max_wait_ms < 0 || m.max_wait_ms > max_route_wait_ms)
    return "max_wait_ms must be in [0, " + to_string(max_route_wait_ms) + "], got " + to_string(m.max_wait_ms);
  return {};
}

problem check(const route_reply& m, const wire_limits& lim) {
  if (m.prefill.empty() || m.decode.empty())
    return "prefill and decode must be set";
  for (const auto& [field, a] : {std::pair{"prefill", &m.prefill}, std::pair{"decode", &m.decode},
                                 std::pair{"kv_source", &m.kv_source}})
    if (auto p = check_address(field, *a, lim); !p.empty())
      return p;
  if (m.cached_blocks < 0)
    return "cached_blocks must be >= 0, got " + to_string(m.cached_blocks);
  if (m.kv_source_blocks < 0)
    return "kv_source_blocks must be >= 0, got " + to_string(m.kv_source_blocks);
  if (m.kv_source.empty() != (m.kv_source_blocks == 0))
    return "kv_source and kv_source_blocks must be set together";
  return check_name("reason", m.reason, lim.max_name_bytes, false);
}

problem check(const worker_views& m, const wire_limits& lim) {
  if (m.workers.size() > lim.max_worker_views)
    return too_long("workers", m.workers.size(), lim.max_worker_views, "entries");
  for (size_t i = 0; i < m.workers.size(); ++i) {
    const auto& w = m.workers[i];
    const auto at = "workers[" + to_string(i) + "]";
    if (w.at.empty())
      return at + ": node and actor must be set";
    if (auto p = check_address(at, w.at, lim); !p.empty())
      return p;
    if (w.role > 2)
      return at + ".role must be 0 (prefill), 1 (decode) or 2 (both), got " + to_string(w.role);
    if (w.last_seen_ms < 0)
      return at + ".last_seen_ms must be >= 0";
    if (w.canary_ms < -1)
      return at + ".canary_ms must be >= -1";
    if (auto p = check_name((at + ".reason").c_str(), w.reason, lim.max_name_bytes, false); !p.empty())
      return p;
  }
  return {};
}

problem check(const kv_fetch_request& m, const wire_limits& lim) {
  if (m.block_hashes.empty())
    return "block_hashes must not be empty";
  if (m.block_hashes.size() > lim.max_blocks_per_batch)
    return too_long("block_hashes", m.block_hashes.size(), lim.max_blocks_per_batch, "entries");
  if (m.max_bytes == 0)
    return "max_bytes must be >= 1";
  return {};
}

problem check(const kv_fetch_reply& m, const wire_limits& lim) {
  if (m.busy && (!m.blocks.empty() || m.more))
    return "a busy reply carries no blocks and no more";
  if (m.blocks.empty())
    return {};
  if (m.blocks.size() > lim.max_blocks_per_batch)
    return too_long("blocks", m.blocks.size(), lim.max_blocks_per_batch, "entries");
  if (auto p = check_layout(m.layout); !p.empty())
    return p;
  const auto bytes = m.layout.block_bytes();
  for (size_t i = 0; i < m.blocks.size(); ++i) {
    const auto& b = m.blocks[i];
    const auto at = "blocks[" + to_string(i) + "]";
    if (b.token_count < 1 || b.token_count > m.layout.block_tokens)
      return at + ".token_count must be in [1, " + to_string(m.layout.block_tokens) + "], got " +
             to_string(b.token_count);
    if (b.data.size() != bytes)
      return at + ".data must hold layout.block_bytes() = " + to_string(bytes) + " bytes, got " +
             to_string(b.data.size());
  }
  return {};
}

problem check(const envelope& m, const wire_limits& lim) {
  if (static_cast<unsigned>(m.kind) > static_cast<unsigned>(envelope_kind::failure))
    return "kind out of range: " + to_string(static_cast<unsigned>(m.kind));
  const bool call = m.kind != envelope_kind::tell;
  if (call && m.call_id == 0)
    return "call_id must not be 0 in a request, response or failure";
  if (!call && m.call_id != 0)
    return "call_id must be 0 in a tell, got " + to_string(m.call_id);
  const bool named = m.kind == envelope_kind::tell || m.kind == envelope_kind::request;
  if (auto p = check_name("operation", m.operation, lim.max_name_bytes, named); !p.empty())
    return p;
  if (!named && !m.operation.empty())
    return "operation must be empty in a response or failure";
  if (m.payload.empty()) {
    if (m.kind == envelope_kind::failure)
      return "a failure's payload must be an error frame, got none";
    return {};
  }
  if (m.payload.size() > lim.max_body_bytes)
    return too_long("payload", m.payload.size(), lim.max_body_bytes, "bytes");
  // The payload is decoded (with every check) by its receiver; here only
  // its header, so that an envelope never nests another.
  auto h = parse_frame_header(m.payload, lim);
  if (!h)
    return "payload is not a frame: " + error_message(h.error());
  if (h->type == static_cast<uint16_t>(message_type::envelope))
    return "payload must not be another envelope";
  if (m.kind == envelope_kind::failure && h->type != static_cast<uint16_t>(message_type::error))
    return "a failure's payload must be an error frame";
  return {};
}

// -- the native client SDK's messages (protocol/client.hpp) -----------------

problem check_text_field(const std::string& field, const std::string& s, size_t max, bool required) {
  if (required && s.empty())
    return field + " must not be empty";
  if (s.size() > max)
    return too_long(field.c_str(), s.size(), max, "bytes");
  return {};
}

problem check(const client_submit& m, const wire_limits& lim) {
  if (m.request_id == 0)
    return "request_id must not be 0";
  if (auto p = check_name("client", m.client, lim.max_name_bytes, false); !p.empty())
    return p;
  if (auto p = check_name("model", m.model, lim.max_name_bytes, false); !p.empty())
    return p;
  if (auto p = check_name("api_key", m.api_key, lim.max_name_bytes, false); !p.empty())
    return p;
  using protocol::prompt_kind;
  if (static_cast<unsigned>(m.kind) > static_cast<unsigned>(prompt_kind::chat))
    return "kind out of range: " + to_string(static_cast<unsigned>(m.kind));
  // Exactly the prompt `kind` names, never two: a frame that carries ids
  // and text must not be read one way here and another way there.
  const bool ids = !m.prompt_ids.empty(), text = !m.prompt_text.empty(), chat = !m.messages.empty();
  const char* want = m.kind == prompt_kind::token_ids ? "prompt_ids"
                     : m.kind == prompt_kind::text    ? "prompt_text"
                                                      : "messages";
  const bool have = m.kind == prompt_kind::token_ids ? ids : m.kind == prompt_kind::text ? text : chat;
  if (!have)
    return std::string(want) + " must not be empty (kind says the prompt is there)";
  if (int(ids) + int(text) + int(chat) != 1)
    return std::string("only ") + want + " may be set (kind names it), but " +
           (ids && m.kind != prompt_kind::token_ids ? "prompt_ids"
            : text && m.kind != prompt_kind::text   ? "prompt_text"
                                                    : "messages") +
           " is set too";
  if (auto p = check_token_ids("prompt_ids", m.prompt_ids, lim.max_tokens); !p.empty())
    return p;
  if (m.prompt_text.size() > protocol::max_client_prompt_bytes)
    return too_long("prompt_text", m.prompt_text.size(), protocol::max_client_prompt_bytes, "bytes");
  if (m.messages.size() > protocol::max_client_messages)
    return too_long("messages", m.messages.size(), protocol::max_client_messages, "entries");
  size_t total = 0;
  for (size_t i = 0; i < m.messages.size(); ++i) {
    const auto at = "messages[" + to_string(i) + "]";
    if (auto p = check_text_field(at + ".role", m.messages[i].role, protocol::max_client_role_bytes, true);
        !p.empty())
      return p;
    total += m.messages[i].content.size();
  }
  if (total > protocol::max_client_prompt_bytes)
    return too_long("messages' contents", total, protocol::max_client_prompt_bytes, "bytes");
  if (auto err = m.params.validate())
    return "params: " + error_message(err);
  if (m.priority < -protocol::max_client_priority || m.priority > protocol::max_client_priority)
    return "priority must be in [-" + to_string(protocol::max_client_priority) + ", " +
           to_string(protocol::max_client_priority) + "], got " + to_string(m.priority);
  return {};
}

problem check(const client_accepted& m, const wire_limits& lim) {
  if (m.request_id == 0)
    return "request_id must not be 0";
  if (auto p = check_token_ids("prompt_token_ids", m.prompt_token_ids, lim.max_tokens); !p.empty())
    return p;
  return check_name("model", m.model, lim.max_name_bytes, false);
}

problem check(const client_cancel& m, const wire_limits& lim) {
  if (m.request_id == 0)
    return "request_id must not be 0";
  return check_name("client", m.client, lim.max_name_bytes, false);
}

problem check(const cluster_info& m, const wire_limits& lim) {
  if (m.models.size() > protocol::max_client_models)
    return too_long("models", m.models.size(), protocol::max_client_models, "entries");
  for (size_t i = 0; i < m.models.size(); ++i)
    if (auto p = check_text_field("models[" + to_string(i) + "]", m.models[i], lim.max_name_bytes, true);
        !p.empty())
      return p;
  if (m.workers < 0 || m.healthy_workers < 0 || m.healthy_workers > m.workers)
    return "healthy_workers must be in [0, workers], got " + to_string(m.healthy_workers) + " of " +
           to_string(m.workers);
  if (m.max_model_len < 0)
    return "max_model_len must be >= 0, got " + to_string(m.max_model_len);
  return {};
}

problem check(const client_failed& m, const wire_limits& lim) {
  const auto code = static_cast<unsigned>(m.code);
  if (code == 0 || code > protocol::max_client_errc)
    return "code out of range: " + to_string(code);
  if (m.http_status < 400 || m.http_status > 599)
    return "http_status must be an error status in [400, 599], got " + to_string(m.http_status);
  if (auto p = check_name("type", m.type, lim.max_name_bytes, true); !p.empty())
    return p;
  if (auto p = check_name("error_code", m.error_code, lim.max_name_bytes, false); !p.empty())
    return p;
  if (auto p = check_name("param", m.param, lim.max_name_bytes, false); !p.empty())
    return p;
  return check_name("message", m.message, lim.max_text_bytes, true);
}

} // namespace

caf::error validate(const wire_message& m, const wire_limits& limits) {
  auto p = std::visit([&](const auto& x) { return check(x, limits); }, m);
  if (p.empty())
    return {};
  return make_transport_error(transport_errc::invalid_message,
                              std::string(to_string(type_of(m))) + ": " + p);
}

} // namespace tessera::transport::wire
