#pragma once
/// @file
/// Every message that crosses a process, as plain C++ structs, and
/// `wire_message`, the variant of all of them. The Cap'n Proto schemas in
/// transport/schema/*.capnp are the wire contract; these structs are what
/// the rest of Tessera sees (no capnp types leak out of transport/wire).
/// The vocabulary they are made of (requests, sampling parameters, token
/// chunks, KV layouts, block hashes, roles) is the protocol library's
/// (protocol/), which depends on nothing of the server: this header links
/// no engine code.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <caf/error.hpp>

#include "protocol/block_hash.hpp"
#include "protocol/client.hpp"
#include "protocol/kv_layout.hpp"
#include "protocol/request.hpp"
#include "protocol/roles.hpp"
#include "protocol/sampling_params.hpp"

namespace tessera::transport::wire {

/// The message kind a frame header names. Values are the wire contract:
/// never renumber; 0 is never valid.
enum class message_type : uint16_t {
  request_handoff = 1,
  token_chunk = 2,
  kv_transfer_batch = 3,
  kv_event = 4,
  membership = 5,
  heartbeat = 6,
  error = 7,
  kv_grant = 8,
  envelope = 9,
  request_cancel = 10,
  worker_join = 11,
  kv_fetch_request = 12,
  kv_fetch_reply = 13,
  request_status = 14,
  request_status_reply = 15,
  route_call = 16,
  route_reply = 17,
  worker_views = 18,
  client_submit = 19,
  client_accepted = 20,
  client_cancel = 21,
  cluster_info = 22,
  client_failed = 23,
};

/// Largest valid message_type value.
inline constexpr uint16_t max_message_type = 23;

/// "request_handoff", ...; "unknown" for a value outside the enum.
[[nodiscard]] std::string_view to_string(message_type t);

/// What one engine exported so another can continue a request: an
/// engine::kv_export without its bytes (those move by RMA / bulk transfer,
/// described by kv_transfer_batch).
struct kv_export_info {
  /// backend::model_fingerprint of the exporter.
  uint64_t model_fingerprint = 0;
  protocol::kv_layout layout;
  /// Prompt followed by the tokens generated so far. [1, max_tokens].
  std::vector<int32_t> tokens;
  /// [1, tokens.size()].
  int32_t prompt_len = 0;
  /// Tokens whose KV was exported: [0, tokens.size()).
  int32_t num_computed = 0;
  /// Sampling seed in use.
  uint64_t seed = 0;
  /// Chained hashes of the full computed blocks: exactly
  /// num_computed / layout.block_tokens of them.
  std::vector<protocol::kv_block_hash> block_hashes;
};

/// An actor on a node, as the bridge addresses it (actors/bridge).
struct actor_address {
  /// Node id; at most max_name_bytes.
  std::string node;
  /// Actor name on that node; at most 64 bytes (the transport's limit).
  std::string actor;
  [[nodiscard]] bool empty() const { return node.empty() && actor.empty(); }
};

/// A request handed to another process. `request.prompt` must be non-empty
/// unless `kv` is set (then the export's tokens are used).
struct request_handoff {
  protocol::request request;
  /// Set when the receiver continues the request from exported KV.
  std::optional<kv_export_info> kv;
  /// Where token chunks go; empty: back to the sender only as the reply.
  /// Both parts or neither.
  actor_address reply_to;
  /// Disaggregated serving: the decode worker that continues after the
  /// prefill; empty when the receiver generates to the end itself. Both
  /// parts or neither.
  actor_address decode_at;
  /// A kv store on another node that holds the prompt's first
  /// kv_source_blocks blocks (the router's index says so; it may be
  /// stale): the receiver may fetch from it (kv_fetch_request) what its
  /// own pool and node store lack instead of computing it. Empty and 0,
  /// or both set.
  actor_address kv_source;
  int32_t kv_source_blocks = 0;
  /// Migration: output tokens the client already received for this request
  /// from a worker that failed (the frontend's stream goes on). The
  /// receiver computes the KV of prompt + these, then generates after them
  /// exactly as the interrupted run would have: the sampler's draw is a
  /// function of (params.seed, output position), penalties count these as
  /// output, they count towards max_tokens, and text held back for a stop
  /// string is emitted as it would have been (engine::import_request of an
  /// export with no KV). Empty for a fresh request; never with kv or
  /// decode_at; fewer than params.max_tokens.
  std::vector<int32_t> resume_output;
};

/// Tokens generated for one request in one step (protocol::request_output):
/// tokens, optional per-token logprobs (empty or one per token), text delta,
/// finish and stop reason, token counts.
using protocol::token_chunk;

/// Where one KV block comes from and goes to in a transfer.
struct kv_block_descriptor {
  protocol::kv_block_hash hash;
  /// Tokens stored in the block: [1, layout.block_tokens].
  int32_t token_count = 0;
  /// Byte range in the sender's registered region: size_bytes in
  /// [1, layout.block_bytes()], offset + size must not overflow.
  uint64_t src_offset = 0;
  uint64_t size_bytes = 0;
  /// Receiver's registered region id and byte offset in it.
  uint32_t dst_region = 0;
  uint64_t dst_offset = 0;
  /// XXH3-64 of the block's bytes (engine::hash_bytes, seed 0).
  uint64_t checksum = 0;
};

/// A batch of KV blocks moved for one request; completion is per batch.
struct kv_transfer_batch {
  uint64_t batch_id = 0;
  uint64_t request_id = 0;
  uint64_t model_fingerprint = 0;
  protocol::kv_layout layout;
  /// [1, wire_limits::max_blocks_per_batch] blocks.
  std::vector<kv_block_descriptor> blocks;
};

/// Storage tier of a KV block.
enum class kv_tier : uint8_t {
  /// The engine's own block pool (device or host memory).
  g1_pool,
  /// The node's host-memory block store.
  g2_host,
  /// Disk.
  g3_disk,
};

/// What happened to a worker's cached blocks.
enum class kv_event_kind : uint8_t { stored, removed, cleared };

/// A change to a worker's cached blocks, for the router's prefix index.
struct kv_event {
  uint64_t worker_id = 0;
  /// Per-worker sequence number (detects lost or reordered events).
  uint64_t event_id = 0;
  kv_tier tier = kv_tier::g1_pool;
  kv_event_kind kind = kv_event_kind::stored;
  /// Parent of the first stored block; nullopt when the chain starts at the
  /// root. Only stored events carry one.
  std::optional<protocol::kv_block_hash> parent_hash;
  /// Stored: the chain in order; removed: any order; cleared: empty.
  /// At most wire_limits::max_event_hashes.
  std::vector<protocol::kv_block_hash> block_hashes;
};

using protocol::node_role;

/// Kind of membership change.
enum class membership_change : uint8_t { join, leave, update };

/// A node joining, leaving or updating its entry in the cluster.
struct membership {
  membership_change change = membership_change::join;
  /// Non-empty, at most wire_limits::max_name_bytes.
  std::string node_id;
  /// Transport address, e.g. "10.0.0.7:13337"; at most max_name_bytes.
  std::string address;
  /// Distinct roles, at most one of each.
  std::vector<node_role> roles;
  /// Shared secret a joining node presents (empty if none configured);
  /// at most max_name_bytes.
  std::string join_token;
};

/// One tier's KV memory use.
struct kv_tier_usage {
  kv_tier tier = kv_tier::g1_pool;
  /// used_bytes <= capacity_bytes.
  uint64_t used_bytes = 0;
  uint64_t capacity_bytes = 0;
};

/// A node's periodic liveness and load report.
struct heartbeat {
  std::string node_id;
  /// Increases by one per heartbeat of a node.
  uint64_t sequence = 0;
  /// Sender's clock, microseconds since the Unix epoch.
  uint64_t timestamp_us = 0;
  /// Load in model units (1.0 = one replica fully busy); finite, >= 0.
  float load = 0.0f;
  /// Requests waiting.
  uint32_t queue_depth = 0;
  /// At most one entry per tier.
  std::vector<kv_tier_usage> kv_usage;
  /// Model units (engine/model_units.hpp) of the work queued and running:
  /// a * prompt tokens left + b * output tokens left + c per request.
  /// Finite, >= 0.
  double outstanding_units = 0;
  /// Model units of work done since the worker started; finite, >= 0.
  double units_served = 0;
};

/// An error sent to a peer (a caf::error flattened to its parts).
struct wire_error {
  /// caf::error category name, e.g. "engine"; non-empty, at most
  /// max_name_bytes.
  std::string category;
  uint8_t code = 0;
  /// At most wire_limits::max_text_bytes.
  std::string message;
};

/// One destination block the receiver of a KV hand-off granted.
struct kv_block_grant {
  /// Byte offset in the receiver's region.
  uint64_t dst_offset = 0;
  /// False when the receiver already holds the block (a prefix-cache hit),
  /// so the sender skips it.
  bool needs_data = true;
};

/// The receiver's answer to a request_handoff carrying KV: where each
/// exported block goes, so the sender can put it there (RMA).
struct kv_grant {
  uint64_t request_id = 0;
  /// The receiver's registered region, as its transport announced it.
  uint32_t dst_region = 0;
  /// One per exported block, in order: [1, max_blocks_per_batch].
  std::vector<kv_block_grant> blocks;
};

/// How an envelope relates to a call.
enum class envelope_kind : uint8_t {
  /// One-way: no reply.
  tell,
  /// Wants exactly one response or failure with the same call_id.
  request,
  /// The reply value of request call_id.
  response,
  /// Request call_id failed; the payload is an error frame.
  failure,
};

/// An actor message between two nodes' bridges (actors/bridge): a named
/// operation for the named actor the transport message addresses, plus the
/// id its reply is matched by. The argument or reply value travels as a
/// whole inner frame: decode() checks the envelope and that the payload is
/// a frame of another type, and the receiver decodes the payload with
/// decode() on its own (so it gets every check a frame gets).
struct envelope {
  envelope_kind kind = envelope_kind::tell;
  /// Non-zero for request, response and failure; 0 for tell.
  uint64_t call_id = 0;
  /// The operation, non-empty for tell and request, empty otherwise; at
  /// most max_name_bytes.
  std::string operation;
  /// An encoded frame of any type but envelope; empty for an operation
  /// without an argument or a response without a value (never for a
  /// failure). At most max_body_bytes.
  std::vector<std::byte> payload;
};

/// Stop a request wherever it is (the client went away, it was migrated).
struct request_cancel {
  uint64_t request_id = 0;
  /// Why, for logs; at most max_name_bytes.
  std::string reason;
};

/// A worker announcing itself to the router (again after a restart).
struct worker_join {
  /// Unique in the cluster; names the worker in KV events.
  uint64_t worker_id = 0;
  /// Where it is: node id and actor name (as actor_address).
  actor_address at;
  /// prefill, decode, or both; distinct, non-empty, only those two roles;
  /// or kvstore alone (a node's kv store joining the router's index).
  std::vector<node_role> roles;
  /// backend::model_fingerprint: with block_tokens, seeds the block hashes.
  uint64_t model_fingerprint = 0;
  /// Tokens per KV block: [1, 4096].
  int32_t block_tokens = 0;
  /// Blocks in its KV pool: >= 1.
  int32_t num_blocks = 0;
  /// engine::engine::hash_seed(): the router hashes prompts with it.
  uint64_t hash_seed = 0;
  /// The worker's model units, fitted for its own device (a sim A100 and
  /// a sim H100 price the same request differently): a, b, c, d, each
  /// finite and >= 0. All 0: not given (a sender from before the field);
  /// the router then prices the worker in its own units.
  double units_a = 0;
  double units_b = 0;
  double units_c = 0;
  double units_d = 0;
};

/// A worker asking a kv store (its node's or a peer's) for the blocks of a
/// hash chain it lacks.
struct kv_fetch_request {
  /// The blocks' namespace (engine::engine::hash_seed of the asker).
  uint64_t ns = 0;
  /// Consecutive blocks of one chain, in order:
  /// [1, wire_limits::max_blocks_per_batch].
  std::vector<protocol::kv_block_hash> block_hashes;
  /// Most payload bytes the reply may carry (the asker asks again for the
  /// rest): >= 1.
  uint64_t max_bytes = 0;
  /// How long the asker waits for the reply from when it sent this, ms
  /// (0: it did not say). A store that has not started reading the fetch
  /// when that has passed (since it received it) answers it empty without
  /// reading: the asker has computed those blocks instead, and a read would
  /// only promote blocks between the tiers for nobody.
  uint32_t wait_ms = 0;
};

/// One block of a kv_fetch_reply, with its bytes.
struct kv_fetched_block {
  protocol::kv_block_hash hash;
  /// [1, layout.block_tokens].
  int32_t token_count = 0;
  /// XXH3-64 of `data` (engine::hash_bytes, seed 0): the asker verifies it.
  uint64_t checksum = 0;
  /// layout.block_bytes() bytes.
  std::vector<std::byte> data;
};

/// A kv store's answer to a kv_fetch_request: the leading blocks of the
/// asked chain it holds, in order, up to the first miss or max_bytes.
struct kv_fetch_reply {
  /// Layout of every block; may be unset when `blocks` is empty.
  protocol::kv_layout layout;
  /// [0, max_blocks_per_batch] blocks.
  std::vector<kv_fetched_block> blocks;
  /// True when the reply stopped at max_bytes (the next block may be
  /// there); false when it stopped at a miss or the chain's end.
  bool more = false;
  /// True when the store was at its bound of fetches in flight and read
  /// nothing (no blocks): the asker computes at once instead of waiting.
  bool busy = false;
};

/// The frontend asking a worker which of the requests it placed there the
/// worker still holds: a stream that went quiet may have lost its request
/// or its last token chunk on the way, and only the worker can tell.
struct request_status {
  /// [1, wire_limits::max_status_ids] request ids.
  std::vector<uint64_t> request_ids;
};

/// A worker's answer to a request_status: the asked ids it does not hold
/// (never received, or finished and forgotten). A subset of the asked ids.
struct request_status_reply {
  /// [0, wire_limits::max_status_ids] request ids.
  std::vector<uint64_t> unknown_ids;
};

/// A frontend asking a router on another node where a request goes
/// (a cluster with several routers: actors/node/router_client.hpp).
struct route_call {
  uint64_t request_id = 0;
  /// [1, wire_limits::max_tokens] tokens.
  std::vector<int32_t> prompt;
  /// At most max_name_bytes.
  std::string cache_salt;
  /// Conversation id for stickiness; empty: none. At most max_text_bytes.
  std::string session_id;
  /// Most tokens it may generate: >= 0.
  int32_t max_tokens = 0;
  /// Most ms the router may hold the call while no decode worker has KV
  /// room for it (actors/router/kv_admission.hpp): the caller's own
  /// timeout allows no more. [0, max_route_wait_ms]; 0: the answering
  /// gateway's default (an older caller sends none).
  int32_t max_wait_ms = 0;
};

/// Largest route_call::max_wait_ms: 60 s.
inline constexpr int32_t max_route_wait_ms = 60000;

/// A router's answer to a route_call (actors::route_answer on the wire).
struct route_reply {
  /// Where the prompt is computed; equals decode when not disaggregated.
  /// Both set.
  actor_address prefill;
  actor_address decode;
  bool disaggregated = false;
  /// >= 0.
  int32_t cached_blocks = 0;
  /// For logs; at most max_name_bytes.
  std::string reason;
  /// A kv store holding the prompt's first kv_source_blocks blocks; empty
  /// and 0: none. kv_source_blocks >= 0.
  actor_address kv_source;
  int32_t kv_source_blocks = 0;
};

/// One worker as a router sees it (for a frontend's /health, /ready and
/// stream watchdog on another node).
struct worker_view {
  uint64_t worker_id = 0;
  /// Where it is (its join's address): both set.
  actor_address at;
  /// 0 prefill, 1 decode, 2 both (actors::worker_role).
  uint8_t role = 2;
  bool healthy = false;
  /// Why it is unhealthy; empty when healthy. At most max_name_bytes.
  std::string reason;
  /// Milliseconds since its last heartbeat or join: >= 0.
  int64_t last_seen_ms = 0;
  /// The last passed canary's round trip; -1 before one passed.
  int64_t canary_ms = -1;
};

/// A router's workers: [0, wire_limits::max_worker_views] of them.
struct worker_views {
  std::vector<worker_view> workers;
};

/// The native client SDK's messages (protocol/client.hpp).
using protocol::client_submit;
using protocol::client_accepted;
using protocol::client_cancel;
using protocol::cluster_info;
using protocol::client_failed;

/// Any message that crosses a process. The alternatives are in
/// message_type order.
using wire_message = std::variant<request_handoff, token_chunk, kv_transfer_batch, kv_event,
                                  membership, heartbeat, wire_error, kv_grant, envelope,
                                  request_cancel, worker_join, kv_fetch_request, kv_fetch_reply,
                                  request_status, request_status_reply, route_call, route_reply,
                                  worker_views, client_submit, client_accepted, client_cancel,
                                  cluster_info, client_failed>;

/// The message_type of the alternative `m` holds.
[[nodiscard]] message_type type_of(const wire_message& m);

/// Flattens a caf::error for the wire (category name, code, message).
[[nodiscard]] wire_error to_wire_error(const caf::error& err);

/// The caf::error a wire_error flattened (category atom, code, message):
/// the receiver's errors compare equal to the sender's codes.
[[nodiscard]] caf::error from_wire_error(const wire_error& e);

} // namespace tessera::transport::wire
