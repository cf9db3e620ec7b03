# Request hand-off between processes (frontend -> worker, prefill worker ->
# decode worker, migration). The KV bytes never travel in this message: they
# move by RMA / bulk transfer, described by kv.capnp's KvTransferBatch.
@0x8d7e739f530eeda8;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tessera::transport::schema");

using Common = import "common.capnp";

# engine::sampling_params, field for field.
struct SamplingParams {
  temperature @0 :Float32 = 1.0;
  topK @1 :Int32;
  topP @2 :Float32 = 1.0;
  minP @3 :Float32;
  repetitionPenalty @4 :Float32 = 1.0;
  frequencyPenalty @5 :Float32;
  presencePenalty @6 :Float32;
  hasSeed @7 :Bool;
  seed @8 :UInt64;
  maxTokens @9 :Int32 = 16;
  minTokens @10 :Int32;
  stopTokenIds @11 :List(Int32);
  stop @12 :List(Text);
  ignoreEos @13 :Bool;
  hasLogprobs @14 :Bool;
  logprobs @15 :Int32;
  # engine::speculative_params when the request set it (else the engine's
  # default): method 0 none, 1 ngram, 2 draft; K draft tokens.
  hasSpeculative @16 :Bool;
  speculativeMethod @17 :UInt8;
  speculativeTokens @18 :Int32;
  # engine::structured_output_params: kind 0 none, 1 json_object,
  # 2 json_schema; the schema's JSON text for json_schema (at most 64 KiB,
  # sampling_params::validate). The receiver compiles it and replays the
  # output so far into a fresh matcher (no matcher bytes travel).
  structuredKind @19 :UInt8;
  structuredSchema @20 :Text;
}

# What one engine exported so another can continue a request
# (engine::kv_export without its data).
struct KvExport {
  modelFingerprint @0 :UInt64;
  layout @1 :Common.KvLayout;
  tokens @2 :List(Int32);
  promptLen @3 :Int32;
  numComputed @4 :Int32;
  seed @5 :UInt64;
  # Retired: the 64-bit hashes of older builds; never set.
  blockHashes @6 :List(UInt64);
  # Chained hashes of the full computed blocks (engine/block_hash.hpp).
  hashes @7 :List(Common.BlockHash);
}

# A request handed to another process (engine::request, plus the KV state
# when the receiver continues rather than starts it).
struct RequestHandoff {
  requestId @0 :UInt64;
  prompt @1 :List(Int32);
  params @2 :SamplingParams;
  priority @3 :Int32;
  cacheSalt @4 :Text;
  keepKv @5 :Bool;
  hasKv @6 :Bool;
  kv @7 :KvExport;
  # Where the request's token chunks go (an actor on a node, the frontend).
  replyNode @8 :Text;
  replyActor @9 :Text;
  # Disaggregated: the decode worker that continues after prefill; empty
  # when the receiver generates to the end itself.
  decodeNode @10 :Text;
  decodeActor @11 :Text;
  # A kv store on another node holding the prompt's first kvSourceBlocks
  # blocks (the router's index): the receiver may fetch them from it.
  kvSourceNode @12 :Text;
  kvSourceActor @13 :Text;
  kvSourceBlocks @14 :Int32;
  # Migration: output tokens the client already received for this request
  # from a worker that failed. The receiver computes prompt + these and
  # generates on after them, as the interrupted run would have.
  resumeOutput @15 :List(Int32);
  # The request continues on another engine after it ends here at
  # maxTokens (engine::request::continues_elsewhere).
  continuesElsewhere @16 :Bool;
}

# Stop a request wherever it is (the client went away, or it was migrated).
struct RequestCancel {
  requestId @0 :UInt64;
  reason @1 :Text;
}

# Which of these requests does a worker still hold? (A quiet stream.)
struct RequestStatus {
  requestIds @0 :List(UInt64);
}

# The asked ids the worker does not hold.
struct RequestStatusReply {
  unknownIds @0 :List(UInt64);
}

# A frontend asking a router on another node where a request goes.
struct RouteCall {
  requestId @0 :UInt64;
  prompt @1 :List(Int32);
  cacheSalt @2 :Text;
  sessionId @3 :Text;
  maxTokens @4 :Int32;
  # Most ms the router may hold the call for KV room; 0: the answering
  # node's default.
  maxWaitMs @5 :Int32;
}

# The router's answer: where the request is prefilled and decoded.
struct RouteReply {
  prefillNode @0 :Text;
  prefillActor @1 :Text;
  decodeNode @2 :Text;
  decodeActor @3 :Text;
  disaggregated @4 :Bool;
  cachedBlocks @5 :Int32;
  reason @6 :Text;
  kvSourceNode @7 :Text;
  kvSourceActor @8 :Text;
  kvSourceBlocks @9 :Int32;
}

# One worker as a router sees it.
struct WorkerView {
  workerId @0 :UInt64;
  node @1 :Text;
  actor @2 :Text;
  # 0 prefill, 1 decode, 2 both.
  role @3 :UInt8;
  healthy @4 :Bool;
  reason @5 :Text;
  lastSeenMs @6 :Int64;
  canaryMs @7 :Int64;
}

# A router's workers.
struct WorkerViews {
  workers @0 :List(WorkerView);
}
