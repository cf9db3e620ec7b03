#include "transport/wire/capnp_body.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include "transport/schema/cluster.capnp.h"
#include "transport/schema/common.capnp.h"
#include "transport/schema/envelope.capnp.h"
#include "transport/schema/kv.capnp.h"
#include "transport/schema/request.capnp.h"
#include "transport/schema/tokens.capnp.h"
#include "transport/wire/capnp_client.hpp"
#include "transport/wire/capnp_fields.hpp"
#include "transport/transport_errc.hpp"

namespace tessera::transport::wire {

namespace s = tessera::transport::schema;
using namespace fields;

namespace {

/// Words of the scratch first segment encode_body builds in.
constexpr size_t first_segment_words = 1024;

// ---------------------------------------------------------------------------
// Encoding. The message was validated by the caller, so sizes fit capnp's
// 2^29-element lists; capnp still throws on anything it refuses, and
// encode_body catches that.

void put(s::KvLayout::Builder b, const protocol::kv_layout& l) {
  b.setBlockTokens(l.block_tokens);
  b.setNumLayers(l.num_layers);
  b.setNumKvHeads(l.num_kv_heads);
  b.setHeadDim(l.head_dim);
  b.setKvDtype(static_cast<s::DType>(l.kv_dtype));
}

void put(s::SamplingParams::Builder b, const protocol::sampling_params& p) {
  b.setTemperature(p.temperature);
  b.setTopK(p.top_k);
  b.setTopP(p.top_p);
  b.setMinP(p.min_p);
  b.setRepetitionPenalty(p.repetition_penalty);
  b.setFrequencyPenalty(p.frequency_penalty);
  b.setPresencePenalty(p.presence_penalty);
  b.setHasSeed(p.seed.has_value());
  b.setSeed(p.seed.value_or(0));
  b.setMaxTokens(p.max_tokens);
  b.setMinTokens(p.min_tokens);
  put_ints(b.initStopTokenIds(static_cast<unsigned>(p.stop_token_ids.size())), p.stop_token_ids);
  auto stop = b.initStop(static_cast<unsigned>(p.stop.size()));
  for (unsigned i = 0; i < p.stop.size(); ++i)
    stop.set(i, text(p.stop[i]));
  b.setIgnoreEos(p.ignore_eos);
  b.setHasLogprobs(p.logprobs.has_value());
  b.setLogprobs(p.logprobs.value_or(0));
  b.setHasSpeculative(p.speculative.has_value());
  if (p.speculative) {
    b.setSpeculativeMethod(static_cast<uint8_t>(p.speculative->method));
    b.setSpeculativeTokens(p.speculative->num_tokens);
  }
  b.setStructuredKind(static_cast<uint8_t>(p.structured_output.kind));
  b.setStructuredSchema(text(p.structured_output.schema));
}

void put(s::BlockHash::Builder b, const protocol::kv_block_hash& h) {
  b.setHi(h.hi);
  b.setLo(h.lo);
}

void put(capnp::List<s::BlockHash>::Builder list, const std::vector<protocol::kv_block_hash>& hashes) {
  for (unsigned i = 0; i < hashes.size(); ++i)
    put(list[i], hashes[i]);
}

void put(capnp::MessageBuilder& mb, const request_handoff& m) {
  auto b = mb.initRoot<s::RequestHandoff>();
  const auto& r = m.request;
  b.setRequestId(r.id);
  put_ints(b.initPrompt(static_cast<unsigned>(r.prompt.size())), r.prompt);
  put(b.initParams(), r.params);
  b.setPriority(r.priority);
  b.setCacheSalt(text(r.cache_salt));
  b.setKeepKv(r.keep_kv);
  b.setContinuesElsewhere(r.continues_elsewhere);
  b.setReplyNode(text(m.reply_to.node));
  b.setReplyActor(text(m.reply_to.actor));
  b.setDecodeNode(text(m.decode_at.node));
  b.setDecodeActor(text(m.decode_at.actor));
  b.setKvSourceNode(text(m.kv_source.node));
  b.setKvSourceActor(text(m.kv_source.actor));
  b.setKvSourceBlocks(m.kv_source_blocks);
  put_ints(b.initResumeOutput(static_cast<unsigned>(m.resume_output.size())), m.resume_output);
  b.setHasKv(m.kv.has_value());
  if (!m.kv)
    return;
  auto kv = b.initKv();
  kv.setModelFingerprint(m.kv->model_fingerprint);
  put(kv.initLayout(), m.kv->layout);
  put_ints(kv.initTokens(static_cast<unsigned>(m.kv->tokens.size())), m.kv->tokens);
  kv.setPromptLen(m.kv->prompt_len);
  kv.setNumComputed(m.kv->num_computed);
  kv.setSeed(m.kv->seed);
  put(kv.initHashes(static_cast<unsigned>(m.kv->block_hashes.size())), m.kv->block_hashes);
}

void put(capnp::MessageBuilder& mb, const token_chunk& m) {
  auto b = mb.initRoot<s::TokenChunk>();
  b.setRequestId(m.id);
  put_ints(b.initTokens(static_cast<unsigned>(m.tokens.size())), m.tokens);
  auto lps = b.initLogprobs(static_cast<unsigned>(m.logprobs.size()));
  for (unsigned i = 0; i < m.logprobs.size(); ++i) {
    const auto& src = m.logprobs[i];
    auto dst = lps[i];
    dst.setToken(src.token);
    dst.setLogprob(src.logprob);
    auto top = dst.initTop(static_cast<unsigned>(src.top_logprobs.size()));
    for (unsigned j = 0; j < src.top_logprobs.size(); ++j) {
      top[j].setToken(src.top_logprobs[j].token);
      top[j].setLogprob(src.top_logprobs[j].logprob);
    }
  }
  b.setText(text(m.text));
  b.setFinishReason(static_cast<s::FinishReason>(m.finish));
  b.setStopReason(text(m.stop_reason));
  b.setStopToken(m.stop_token);
  b.setPromptTokens(m.prompt_tokens);
  b.setCachedPromptTokens(m.cached_prompt_tokens);
  b.setOutputTokens(m.output_tokens);
  if (m.error) {
    const auto why = to_wire_error(m.error);
    auto e = b.initError();
    e.setCategory(text(why.category));
    e.setCode(why.code);
    e.setMessage(text(why.message));
  }
}

void put(capnp::MessageBuilder& mb, const kv_transfer_batch& m) {
  auto b = mb.initRoot<s::KvTransferBatch>();
  b.setBatchId(m.batch_id);
  b.setRequestId(m.request_id);
  b.setModelFingerprint(m.model_fingerprint);
  put(b.initLayout(), m.layout);
  auto blocks = b.initBlocks(static_cast<unsigned>(m.blocks.size()));
  for (unsigned i = 0; i < m.blocks.size(); ++i) {
    const auto& src = m.blocks[i];
    auto dst = blocks[i];
    put(dst.initBlockHash(), src.hash);
    dst.setTokenCount(src.token_count);
    dst.setSrcOffset(src.src_offset);
    dst.setSizeBytes(src.size_bytes);
    dst.setDstRegion(src.dst_region);
    dst.setDstOffset(src.dst_offset);
    dst.setChecksum(src.checksum);
  }
}

void put(capnp::MessageBuilder& mb, const kv_event& m) {
  auto b = mb.initRoot<s::KvEvent>();
  b.setWorkerId(m.worker_id);
  b.setEventId(m.event_id);
  b.setTier(static_cast<s::KvTier>(m.tier));
  b.setKind(static_cast<s::KvEventKind>(m.kind));
  b.setHasParent(m.parent_hash.has_value());
  if (m.parent_hash)
    put(b.initParent(), *m.parent_hash);
  put(b.initHashes(static_cast<unsigned>(m.block_hashes.size())), m.block_hashes);
}

void put(capnp::MessageBuilder& mb, const membership& m) {
  auto b = mb.initRoot<s::Membership>();
  b.setChange(static_cast<s::MembershipChange>(m.change));
  b.setNodeId(text(m.node_id));
  b.setAddress(text(m.address));
  auto roles = b.initRoles(static_cast<unsigned>(m.roles.size()));
  for (unsigned i = 0; i < m.roles.size(); ++i)
    roles.set(i, static_cast<s::NodeRole>(m.roles[i]));
  b.setJoinToken(text(m.join_token));
}

void put(capnp::MessageBuilder& mb, const heartbeat& m) {
  auto b = mb.initRoot<s::Heartbeat>();
  b.setNodeId(text(m.node_id));
  b.setSequence(m.sequence);
  b.setTimestampUs(m.timestamp_us);
  b.setLoad(m.load);
  b.setQueueDepth(m.queue_depth);
  auto usage = b.initKvUsage(static_cast<unsigned>(m.kv_usage.size()));
  for (unsigned i = 0; i < m.kv_usage.size(); ++i) {
    usage[i].setTier(static_cast<s::KvTier>(m.kv_usage[i].tier));
    usage[i].setUsedBytes(m.kv_usage[i].used_bytes);
    usage[i].setCapacityBytes(m.kv_usage[i].capacity_bytes);
  }
  b.setOutstandingUnits(m.outstanding_units);
  b.setUnitsServed(m.units_served);
}

void put(capnp::MessageBuilder& mb, const wire_error& m) {
  auto b = mb.initRoot<s::Error>();
  b.setCategory(text(m.category));
  b.setCode(m.code);
  b.setMessage(text(m.message));
}

void put(capnp::MessageBuilder& mb, const kv_grant& m) {
  auto b = mb.initRoot<s::KvGrant>();
  b.setRequestId(m.request_id);
  b.setDstRegion(m.dst_region);
  auto blocks = b.initBlocks(static_cast<unsigned>(m.blocks.size()));
  for (unsigned i = 0; i < m.blocks.size(); ++i) {
    blocks[i].setDstOffset(m.blocks[i].dst_offset);
    blocks[i].setNeedsData(m.blocks[i].needs_data);
  }
}

void put(capnp::MessageBuilder& mb, const envelope& m) {
  auto b = mb.initRoot<s::Envelope>();
  b.setKind(static_cast<s::EnvelopeKind>(m.kind));
  b.setCallId(m.call_id);
  b.setOperation(text(m.operation));
  b.setPayload(kj::arrayPtr(reinterpret_cast<const kj::byte*>(m.payload.data()), m.payload.size()));
}

void put(capnp::MessageBuilder& mb, const request_cancel& m) {
  auto b = mb.initRoot<s::RequestCancel>();
  b.setRequestId(m.request_id);
  b.setReason(text(m.reason));
}

void put_ids(capnp::List<uint64_t>::Builder out, const std::vector<uint64_t>& ids) {
  for (unsigned i = 0; i < ids.size(); ++i)
    out.set(i, ids[i]);
}

void put(capnp::MessageBuilder& mb, const request_status& m) {
  put_ids(mb.initRoot<s::RequestStatus>().initRequestIds(static_cast<unsigned>(m.request_ids.size())),
          m.request_ids);
}

void put(capnp::MessageBuilder& mb, const request_status_reply& m) {
  put_ids(mb.initRoot<s::RequestStatusReply>().initUnknownIds(static_cast<unsigned>(m.unknown_ids.size())),
          m.unknown_ids);
}

void put(capnp::MessageBuilder& mb, const route_call& m) {
  auto b = mb.initRoot<s::RouteCall>();
  b.setRequestId(m.request_id);
  put_ints(b.initPrompt(static_cast<unsigned>(m.prompt.size())), m.prompt);
  b.setCacheSalt(text(m.cache_salt));
  b.setSessionId(text(m.session_id));
  b.setMaxTokens(m.max_tokens);
  b.setMaxWaitMs(m.max_wait_ms);
}

void put(capnp::MessageBuilder& mb, const route_reply& m) {
  auto b = mb.initRoot<s::RouteReply>();
  b.setPrefillNode(text(m.prefill.node));
  b.setPrefillActor(text(m.prefill.actor));
  b.setDecodeNode(text(m.decode.node));
  b.setDecodeActor(text(m.decode.actor));
  b.setDisaggregated(m.disaggregated);
  b.setCachedBlocks(m.cached_blocks);
  b.setReason(text(m.reason));
  b.setKvSourceNode(text(m.kv_source.node));
  b.setKvSourceActor(text(m.kv_source.actor));
  b.setKvSourceBlocks(m.kv_source_blocks);
}

void put(capnp::MessageBuilder& mb, const worker_views& m) {
  auto list = mb.initRoot<s::WorkerViews>().initWorkers(static_cast<unsigned>(m.workers.size()));
  for (unsigned i = 0; i < m.workers.size(); ++i) {
    const auto& w = m.workers[i];
    auto b = list[i];
    b.setWorkerId(w.worker_id);
    b.setNode(text(w.at.node));
    b.setActor(text(w.at.actor));
    b.setRole(w.role);
    b.setHealthy(w.healthy);
    b.setReason(text(w.reason));
    b.setLastSeenMs(w.last_seen_ms);
    b.setCanaryMs(w.canary_ms);
  }
}

void put(capnp::MessageBuilder& mb, const worker_join& m) {
  auto b = mb.initRoot<s::WorkerJoin>();
  b.setWorkerId(m.worker_id);
  b.setNode(text(m.at.node));
  b.setActor(text(m.at.actor));
  auto roles = b.initRoles(static_cast<unsigned>(m.roles.size()));
  for (unsigned i = 0; i < m.roles.size(); ++i)
    roles.set(i, static_cast<s::NodeRole>(m.roles[i]));
  b.setModelFingerprint(m.model_fingerprint);
  b.setBlockTokens(m.block_tokens);
  b.setNumBlocks(m.num_blocks);
  b.setHashSeed(m.hash_seed);
  b.setUnitsA(m.units_a);
  b.setUnitsB(m.units_b);
  b.setUnitsC(m.units_c);
  b.setUnitsD(m.units_d);
}

void put(capnp::MessageBuilder& mb, const kv_fetch_request& m) {
  auto b = mb.initRoot<s::KvFetchRequest>();
  b.setNs(m.ns);
  put(b.initHashes(static_cast<unsigned>(m.block_hashes.size())), m.block_hashes);
  b.setMaxBytes(m.max_bytes);
  b.setWaitMs(m.wait_ms);
}

void put(capnp::MessageBuilder& mb, const kv_fetch_reply& m) {
  auto b = mb.initRoot<s::KvFetchReply>();
  put(b.initLayout(), m.layout);
  auto blocks = b.initBlocks(static_cast<unsigned>(m.blocks.size()));
  for (unsigned i = 0; i < m.blocks.size(); ++i) {
    const auto& src = m.blocks[i];
    auto dst = blocks[i];
    put(dst.initBlockHash(), src.hash);
    dst.setTokenCount(src.token_count);
    dst.setChecksum(src.checksum);
    dst.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(src.data.data()), src.data.size()));
  }
  b.setMore(m.more);
  b.setBusy(m.busy);
}

// ---------------------------------------------------------------------------
// Decoding. A failure deep inside a nested reader is thrown as
// fields::decode_failure (capnp_fields.hpp) and caught in decode_body, next
// to the kj::Exception capnp throws; neither leaves transport/wire.

template <class Enum>
uint16_t enum_in_range(const std::string& field, Enum v, uint16_t max) {
  const auto raw = static_cast<uint16_t>(v);
  if (raw > max)
    refuse(field + " out of range: " + std::to_string(raw) + " (max " + std::to_string(max) + ")");
  return raw;
}

std::vector<std::byte> get_bytes(const char* field, capnp::Data::Reader d, size_t max) {
  bound(field, d.size(), max, "bytes");
  const auto* p = reinterpret_cast<const std::byte*>(d.begin());
  return {p, p + d.size()};
}

// A peer of a build before 128-bit block hashes sets the retired 64-bit
// fields and leaves the new ones empty: refused by name, never misread.
void refuse_retired(const std::string& field, bool present) {
  if (present)
    refuse(field + " carries retired 64-bit block hashes (a peer of an older build)");
}

protocol::kv_block_hash get_hash(const std::string& field, s::BlockHash::Reader r, uint64_t retired) {
  refuse_retired(field, retired != 0);
  return {r.getHi(), r.getLo()};
}

std::vector<protocol::kv_block_hash> get_hashes(const std::string& field, capnp::List<s::BlockHash>::Reader list,
                                              capnp::List<uint64_t>::Reader retired, size_t max) {
  refuse_retired(field, retired.size() != 0);
  bound(field, list.size(), max, "entries");
  std::vector<protocol::kv_block_hash> out;
  out.reserve(list.size());
  for (auto h : list)
    out.push_back({h.getHi(), h.getLo()});
  return out;
}

protocol::kv_layout get(const std::string& field, s::KvLayout::Reader r) {
  protocol::kv_layout l;
  l.block_tokens = r.getBlockTokens();
  l.num_layers = r.getNumLayers();
  l.num_kv_heads = r.getNumKvHeads();
  l.head_dim = r.getHeadDim();
  l.kv_dtype = static_cast<protocol::dtype>(enum_in_range(field + ".kv_dtype", r.getKvDtype(), 3));
  return l;
}

protocol::sampling_params get(s::SamplingParams::Reader r) {
  protocol::sampling_params p;
  p.temperature = r.getTemperature();
  p.top_k = r.getTopK();
  p.top_p = r.getTopP();
  p.min_p = r.getMinP();
  p.repetition_penalty = r.getRepetitionPenalty();
  p.frequency_penalty = r.getFrequencyPenalty();
  p.presence_penalty = r.getPresencePenalty();
  if (r.getHasSeed())
    p.seed = r.getSeed();
  p.max_tokens = r.getMaxTokens();
  p.min_tokens = r.getMinTokens();
  // sampling_params::validate checks the exact bounds (64 ids, 16 strings
  // of 256 bytes); these only stop a huge copy before it happens.
  p.stop_token_ids = get_list<int32_t>("params.stop_token_ids", r.getStopTokenIds(), 1024, "ids");
  auto stop = r.getStop();
  bound("params.stop", stop.size(), 1024, "strings");
  for (unsigned i = 0; i < stop.size(); ++i)
    p.stop.push_back(get_text("params.stop[" + std::to_string(i) + "]", stop[i], 4096));
  p.ignore_eos = r.getIgnoreEos();
  if (r.getHasLogprobs())
    p.logprobs = r.getLogprobs();
  if (r.getHasSpeculative()) {
    // sampling_params::validate checks num_tokens; the method must be one
    // the engine knows.
    const auto m = r.getSpeculativeMethod();
    if (m > static_cast<uint8_t>(protocol::speculative_params::method_kind::draft))
      refuse("params.speculative method " + std::to_string(m) + " is not none (0), ngram (1) or draft (2)");
    p.speculative = protocol::speculative_params{static_cast<protocol::speculative_params::method_kind>(m),
                                               r.getSpeculativeTokens()};
  }
  // The schema is bounded here (sampling_params::validate checks it again
  // with the kind); the engine compiles it, refusing what it cannot.
  using so = protocol::structured_output_params::kind_type;
  const auto kind = r.getStructuredKind();
  if (kind > static_cast<uint8_t>(so::json_schema))
    refuse("params.structured_output kind " + std::to_string(kind) +
           " is not none (0), json_object (1) or json_schema (2)");
  p.structured_output.kind = static_cast<so>(kind);
  p.structured_output.schema = get_text("params.structured_output.schema", r.getStructuredSchema(),
                                        protocol::structured_output_params::max_schema_bytes);
  return p;
}

request_handoff get(s::RequestHandoff::Reader r, const wire_limits& lim) {
  request_handoff m;
  m.request.id = r.getRequestId();
  m.request.prompt = get_list<int32_t>("prompt", r.getPrompt(), lim.max_tokens, "tokens");
  m.request.params = get(r.getParams());
  m.request.priority = r.getPriority();
  m.request.cache_salt = get_text("cache_salt", r.getCacheSalt(), lim.max_name_bytes);
  m.request.keep_kv = r.getKeepKv();
  m.request.continues_elsewhere = r.getContinuesElsewhere();
  m.reply_to.node = get_text("reply_to.node", r.getReplyNode(), lim.max_name_bytes);
  m.reply_to.actor = get_text("reply_to.actor", r.getReplyActor(), lim.max_name_bytes);
  m.decode_at.node = get_text("decode_at.node", r.getDecodeNode(), lim.max_name_bytes);
  m.decode_at.actor = get_text("decode_at.actor", r.getDecodeActor(), lim.max_name_bytes);
  m.kv_source.node = get_text("kv_source.node", r.getKvSourceNode(), lim.max_name_bytes);
  m.kv_source.actor = get_text("kv_source.actor", r.getKvSourceActor(), lim.max_name_bytes);
  m.kv_source_blocks = r.getKvSourceBlocks();
  m.resume_output = get_list<int32_t>("resume_output", r.getResumeOutput(), lim.max_tokens, "tokens");
  if (r.getHasKv()) {
    auto kr = r.getKv();
    kv_export_info kv;
    kv.model_fingerprint = kr.getModelFingerprint();
    kv.layout = get("kv.layout", kr.getLayout());
    kv.tokens = get_list<int32_t>("kv.tokens", kr.getTokens(), lim.max_tokens, "tokens");
    kv.prompt_len = kr.getPromptLen();
    kv.num_computed = kr.getNumComputed();
    kv.seed = kr.getSeed();
    kv.block_hashes = get_hashes("kv.block_hashes", kr.getHashes(), kr.getBlockHashes(), lim.max_tokens);
    m.kv = std::move(kv);
  }
  return m;
}

token_chunk get(s::TokenChunk::Reader r, const wire_limits& lim) {
  token_chunk m;
  m.id = r.getRequestId();
  m.tokens = get_list<int32_t>("tokens", r.getTokens(), lim.max_chunk_tokens, "tokens");
  auto lps = r.getLogprobs();
  bound("logprobs", lps.size(), lim.max_chunk_tokens, "entries");
  m.logprobs.reserve(lps.size());
  for (unsigned i = 0; i < lps.size(); ++i) {
    auto lp = lps[i];
    protocol::sampled_token t;
    t.token = lp.getToken();
    t.logprob = lp.getLogprob();
    auto top = lp.getTop();
    bound("logprobs[" + std::to_string(i) + "].top_logprobs", top.size(),
          protocol::sampling_params::max_logprobs, "entries");
    for (auto e : top)
      t.top_logprobs.push_back({e.getToken(), e.getLogprob()});
    m.logprobs.push_back(std::move(t));
  }
  m.text = get_text("text", r.getText(), lim.max_text_bytes);
  m.finish = static_cast<protocol::finish_reason>(
    enum_in_range("finish_reason", r.getFinishReason(), 3));
  m.stop_reason = get_text("stop_reason", r.getStopReason(), lim.max_name_bytes);
  m.stop_token = r.getStopToken();
  m.prompt_tokens = r.getPromptTokens();
  m.cached_prompt_tokens = r.getCachedPromptTokens();
  m.output_tokens = r.getOutputTokens();
  if (r.hasError()) {
    auto e = r.getError();
    wire_error why;
    why.category = get_text("error.category", e.getCategory(), lim.max_name_bytes);
    why.code = e.getCode();
    why.message = get_text("error.message", e.getMessage(), lim.max_text_bytes);
    if (!why.category.empty())
      m.error = from_wire_error(why);
  }
  return m;
}

kv_transfer_batch get(s::KvTransferBatch::Reader r, const wire_limits& lim) {
  kv_transfer_batch m;
  m.batch_id = r.getBatchId();
  m.request_id = r.getRequestId();
  m.model_fingerprint = r.getModelFingerprint();
  m.layout = get("layout", r.getLayout());
  auto blocks = r.getBlocks();
  bound("blocks", blocks.size(), lim.max_blocks_per_batch, "entries");
  m.blocks.reserve(blocks.size());
  for (auto b : blocks) {
    kv_block_descriptor d;
    d.hash = get_hash("blocks[].hash", b.getBlockHash(), b.getHash());
    d.token_count = b.getTokenCount();
    d.src_offset = b.getSrcOffset();
    d.size_bytes = b.getSizeBytes();
    d.dst_region = b.getDstRegion();
    d.dst_offset = b.getDstOffset();
    d.checksum = b.getChecksum();
    m.blocks.push_back(d);
  }
  return m;
}

kv_event get(s::KvEvent::Reader r, const wire_limits& lim) {
  kv_event m;
  m.worker_id = r.getWorkerId();
  m.event_id = r.getEventId();
  m.tier = static_cast<kv_tier>(enum_in_range("tier", r.getTier(), 2));
  m.kind = static_cast<kv_event_kind>(enum_in_range("kind", r.getKind(), 2));
  if (r.getHasParent())
    m.parent_hash = get_hash("parent_hash", r.getParent(), r.getParentHash());
  m.block_hashes = get_hashes("block_hashes", r.getHashes(), r.getBlockHashes(), lim.max_event_hashes);
  return m;
}

std::vector<node_role> get_roles(capnp::List<s::NodeRole>::Reader roles) {
  bound("roles", roles.size(), 5, "entries");
  std::vector<node_role> out;
  for (unsigned i = 0; i < roles.size(); ++i)
    out.push_back(static_cast<node_role>(
      enum_in_range("roles[" + std::to_string(i) + "]", roles[i], 4)));
  return out;
}

membership get(s::Membership::Reader r, const wire_limits& lim) {
  membership m;
  m.change = static_cast<membership_change>(enum_in_range("change", r.getChange(), 2));
  m.node_id = get_text("node_id", r.getNodeId(), lim.max_name_bytes);
  m.address = get_text("address", r.getAddress(), lim.max_name_bytes);
  m.roles = get_roles(r.getRoles());
  m.join_token = get_text("join_token", r.getJoinToken(), lim.max_name_bytes);
  return m;
}

heartbeat get(s::Heartbeat::Reader r, const wire_limits& lim) {
  heartbeat m;
  m.node_id = get_text("node_id", r.getNodeId(), lim.max_name_bytes);
  m.sequence = r.getSequence();
  m.timestamp_us = r.getTimestampUs();
  m.load = r.getLoad();
  m.queue_depth = r.getQueueDepth();
  auto usage = r.getKvUsage();
  bound("kv_usage", usage.size(), 3, "entries");
  for (unsigned i = 0; i < usage.size(); ++i) {
    auto u = usage[i];
    m.kv_usage.push_back(
      {static_cast<kv_tier>(enum_in_range("kv_usage[" + std::to_string(i) + "].tier", u.getTier(), 2)),
       u.getUsedBytes(), u.getCapacityBytes()});
  }
  m.outstanding_units = r.getOutstandingUnits();
  m.units_served = r.getUnitsServed();
  return m;
}

wire_error get(s::Error::Reader r, const wire_limits& lim) {
  wire_error m;
  m.category = get_text("category", r.getCategory(), lim.max_name_bytes);
  m.code = r.getCode();
  m.message = get_text("message", r.getMessage(), lim.max_text_bytes);
  return m;
}

kv_grant get(s::KvGrant::Reader r, const wire_limits& lim) {
  kv_grant m;
  m.request_id = r.getRequestId();
  m.dst_region = r.getDstRegion();
  auto blocks = r.getBlocks();
  bound("blocks", blocks.size(), lim.max_blocks_per_batch, "entries");
  m.blocks.reserve(blocks.size());
  for (auto b : blocks)
    m.blocks.push_back({b.getDstOffset(), b.getNeedsData()});
  return m;
}

envelope get(s::Envelope::Reader r, const wire_limits& lim) {
  envelope m;
  m.kind = static_cast<envelope_kind>(enum_in_range("kind", r.getKind(), 3));
  m.call_id = r.getCallId();
  m.operation = get_text("operation", r.getOperation(), lim.max_name_bytes);
  m.payload = get_bytes("payload", r.getPayload(), lim.max_body_bytes);
  return m;
}

request_cancel get(s::RequestCancel::Reader r, const wire_limits& lim) {
  return {r.getRequestId(), get_text("reason", r.getReason(), lim.max_name_bytes)};
}

request_status get(s::RequestStatus::Reader r, const wire_limits& lim) {
  return {get_list<uint64_t>("request_ids", r.getRequestIds(), lim.max_status_ids, "entries")};
}

request_status_reply get(s::RequestStatusReply::Reader r, const wire_limits& lim) {
  return {get_list<uint64_t>("unknown_ids", r.getUnknownIds(), lim.max_status_ids, "entries")};
}

route_call get(s::RouteCall::Reader r, const wire_limits& lim) {
  route_call m;
  m.request_id = r.getRequestId();
  m.prompt = get_list<int32_t>("prompt", r.getPrompt(), lim.max_tokens, "tokens");
  m.cache_salt = get_text("cache_salt", r.getCacheSalt(), lim.max_name_bytes);
  m.session_id = get_text("session_id", r.getSessionId(), lim.max_text_bytes);
  m.max_tokens = r.getMaxTokens();
  m.max_wait_ms = r.getMaxWaitMs();
  return m;
}

route_reply get(s::RouteReply::Reader r, const wire_limits& lim) {
  route_reply m;
  m.prefill = {get_text("prefill.node", r.getPrefillNode(), lim.max_name_bytes),
               get_text("prefill.actor", r.getPrefillActor(), lim.max_name_bytes)};
  m.decode = {get_text("decode.node", r.getDecodeNode(), lim.max_name_bytes),
              get_text("decode.actor", r.getDecodeActor(), lim.max_name_bytes)};
  m.disaggregated = r.getDisaggregated();
  m.cached_blocks = r.getCachedBlocks();
  m.reason = get_text("reason", r.getReason(), lim.max_name_bytes);
  m.kv_source = {get_text("kv_source.node", r.getKvSourceNode(), lim.max_name_bytes),
                 get_text("kv_source.actor", r.getKvSourceActor(), lim.max_name_bytes)};
  m.kv_source_blocks = r.getKvSourceBlocks();
  return m;
}

worker_views get(s::WorkerViews::Reader r, const wire_limits& lim) {
  auto list = r.getWorkers();
  bound("workers", list.size(), lim.max_worker_views, "entries");
  worker_views m;
  m.workers.reserve(list.size());
  for (auto b : list) {
    worker_view w;
    w.worker_id = b.getWorkerId();
    w.at = {get_text("workers[].node", b.getNode(), lim.max_name_bytes),
            get_text("workers[].actor", b.getActor(), lim.max_name_bytes)};
    w.role = b.getRole();
    w.healthy = b.getHealthy();
    w.reason = get_text("workers[].reason", b.getReason(), lim.max_name_bytes);
    w.last_seen_ms = b.getLastSeenMs();
    w.canary_ms = b.getCanaryMs();
    m.workers.push_back(std::move(w));
  }
  return m;
}

worker_join get(s::WorkerJoin::Reader r, const wire_limits& lim) {
  worker_join m;
  m.worker_id = r.getWorkerId();
  m.at.node = get_text("at.node", r.getNode(), lim.max_name_bytes);
  m.at.actor = get_text("at.actor", r.getActor(), lim.max_name_bytes);
  m.roles = get_roles(r.getRoles());
  m.model_fingerprint = r.getModelFingerprint();
  m.block_tokens = r.getBlockTokens();
  m.num_blocks = r.getNumBlocks();
  m.hash_seed = r.getHashSeed();
  m.units_a = r.getUnitsA();
  m.units_b = r.getUnitsB();
  m.units_c = r.getUnitsC();
  m.units_d = r.getUnitsD();
  return m;
}

kv_fetch_request get(s::KvFetchRequest::Reader r, const wire_limits& lim) {
  kv_fetch_request m;
  m.ns = r.getNs();
  m.block_hashes = get_hashes("block_hashes", r.getHashes(), r.getBlockHashes(), lim.max_blocks_per_batch);
  m.max_bytes = r.getMaxBytes();
  m.wait_ms = r.getWaitMs();
  return m;
}

kv_fetch_reply get(s::KvFetchReply::Reader r, const wire_limits& lim) {
  kv_fetch_reply m;
  m.layout = get("layout", r.getLayout());
  auto blocks = r.getBlocks();
  bound("blocks", blocks.size(), lim.max_blocks_per_batch, "entries");
  m.blocks.reserve(blocks.size());
  for (auto b : blocks) {
    kv_fetched_block out;
    out.hash = get_hash("blocks[].hash", b.getBlockHash(), b.getHash());
    out.token_count = b.getTokenCount();
    out.checksum = b.getChecksum();
    out.data = get_bytes("blocks[].data", b.getData(), lim.max_body_bytes);
    m.blocks.push_back(std::move(out));
  }
  m.more = r.getMore();
  m.busy = r.getBusy();
  return m;
}

wire_message read_root(message_type type, capnp::MessageReader& reader, const wire_limits& lim) {
  switch (type) {
    case message_type::request_handoff: return get(reader.getRoot<s::RequestHandoff>(), lim);
    case message_type::token_chunk: return get(reader.getRoot<s::TokenChunk>(), lim);
    case message_type::kv_transfer_batch: return get(reader.getRoot<s::KvTransferBatch>(), lim);
    case message_type::kv_event: return get(reader.getRoot<s::KvEvent>(), lim);
    case message_type::membership: return get(reader.getRoot<s::Membership>(), lim);
    case message_type::heartbeat: return get(reader.getRoot<s::Heartbeat>(), lim);
    case message_type::error: return get(reader.getRoot<s::Error>(), lim);
    case message_type::kv_grant: return get(reader.getRoot<s::KvGrant>(), lim);
    case message_type::envelope: return get(reader.getRoot<s::Envelope>(), lim);
    case message_type::request_cancel: return get(reader.getRoot<s::RequestCancel>(), lim);
    case message_type::worker_join: return get(reader.getRoot<s::WorkerJoin>(), lim);
    case message_type::kv_fetch_request: return get(reader.getRoot<s::KvFetchRequest>(), lim);
    case message_type::kv_fetch_reply: return get(reader.getRoot<s::KvFetchReply>(), lim);
    case message_type::request_status: return get(reader.getRoot<s::RequestStatus>(), lim);
    case message_type::request_status_reply: return get(reader.getRoot<s::RequestStatusReply>(), lim);
    case message_type::route_call: return get(reader.getRoot<s::RouteCall>(), lim);
    case message_type::route_reply: return get(reader.getRoot<s::RouteReply>(), lim);
    case message_type::worker_views: return get(reader.getRoot<s::WorkerViews>(), lim);
    case message_type::client_submit:
    case message_type::client_accepted:
    case message_type::client_cancel:
    case message_type::cluster_info:
    case message_type::client_failed: break; // decode_body reads them with read_client
  }
  throw decode_failure{transport_errc::unknown_type,
                       "unknown message type " + std::to_string(static_cast<unsigned>(type))};
}

std::string describe(const kj::Exception& e) {
  return std::string(e.getDescription().cStr());
}

} // namespace

void detail::put_sampling_params(s::SamplingParams::Builder b, const protocol::sampling_params& p) {
  put(b, p);
}

caf::expected<protocol::sampling_params> detail::get_sampling_params(s::SamplingParams::Reader r) {
  try {
    return get(r);
  } catch (const decode_failure& f) {
    return make_transport_error(f.code, f.what);
  }
}

caf::error encode_body(const wire_message& m, std::vector<std::byte>& out,
                       const wire_limits& limits) {
  try {
    // The first segment is this thread's scratch: a control message fits
    // it, and the builder zeroes only the words it used when it is
    // destroyed, where its own first segment would be an 8 KiB calloc per
    // message (a third of a small message's encoding time).
    thread_local std::array<capnp::word, first_segment_words> scratch{};
    capnp::MallocMessageBuilder mb(kj::arrayPtr(scratch.data(), scratch.size()));
    std::visit([&](const auto& x) { put(mb, x); }, m);
    const size_t bytes = capnp::computeSerializedSizeInWords(mb) * sizeof(capnp::word);
    if (bytes > limits.max_body_bytes)
      return make_transport_error(transport_errc::message_too_large,
                                  std::string(to_string(type_of(m))) + " encodes to " +
                                    std::to_string(bytes) + " bytes, more than the maximum " +
                                    std::to_string(limits.max_body_bytes));
    const size_t at = out.size();
    out.resize(at + bytes);
    kj::ArrayOutputStream os(kj::arrayPtr(reinterpret_cast<kj::byte*>(out.data() + at), bytes));
    capnp::writeMessage(os, mb);
    return {};
  } catch (const kj::Exception& e) {
    return make_transport_error(transport_errc::message_too_large,
                                std::string(to_string(type_of(m))) +
                                  ": capnp refused to encode it: " + describe(e));
  }
}

caf::expected<wire_message> decode_body(message_type type, std::span<const std::byte> body,
                                        const wire_limits& limits) {
  const std::string kind(to_string(type));
  if (body.size() % sizeof(capnp::word) != 0)
    return make_transport_error(transport_errc::bad_frame,
                                kind + ": body length " + std::to_string(body.size()) +
                                  " is not a multiple of 8");
  const size_t n_words = body.size() / sizeof(capnp::word);
  // FlatArrayMessageReader reads words in place: it needs 8-byte alignment.
  // (capnp::word is not copyable, so not a std::vector element.)
  std::unique_ptr<capnp::word[]> aligned;
  const capnp::word* words = reinterpret_cast<const capnp::word*>(body.data());
  if (reinterpret_cast<uintptr_t>(body.data()) % alignof(capnp::word) != 0) {
    aligned.reset(new capnp::word[n_words]);
    std::memcpy(static_cast<void*>(aligned.get()), body.data(), body.size());
    words = aligned.get();
  }
  capnp::ReaderOptions options;
  // Twice the body's size: enough to read every field once with room to
  // spare, and no more, so a small frame cannot make the reader walk (or
  // make us copy) much more than it carries.
  options.traversalLimitInWords = 2 * n_words + 64;
  options.nestingLimit = limits.nesting_limit;
  try {
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words, n_words), options);
    if (reader.getEnd() != words + n_words)
      return make_transport_error(
        transport_errc::bad_frame,
        kind + ": " + std::to_string((words + n_words - reader.getEnd()) * sizeof(capnp::word)) +
          " trailing bytes after the capnp message");
    if (is_client_message(type))
      return read_client(type, reader, limits);
    return read_root(type, reader, limits);
  } catch (const decode_failure& f) {
    return make_transport_error(f.code, kind + ": " + f.what);
  } catch (const kj::Exception& e) {
    return make_transport_error(transport_errc::bad_frame,
                                kind + ": body is not a valid capnp message: " + describe(e));
  }
}

} // namespace tessera::transport::wire
