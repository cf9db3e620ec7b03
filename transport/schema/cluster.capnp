# Cluster membership and liveness.
@0x8d1b6623b9f7ea83;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tessera::transport::schema");

using Common = import "common.capnp";

enum NodeRole {
  frontend @0;
  router @1;
  prefill @2;
  decode @3;
  kvstore @4;
}

enum MembershipChange {
  join @0;
  leave @1;
  update @2;
}

struct Membership {
  change @0 :MembershipChange;
  nodeId @1 :Text;
  # Where the node's transport listens, e.g. "10.0.0.7:13337".
  address @2 :Text;
  roles @3 :List(NodeRole);
  # Shared secret a joining node presents (empty when not configured).
  joinToken @4 :Text;
}

struct KvTierUsage {
  tier @0 :Common.KvTier;
  usedBytes @1 :UInt64;
  capacityBytes @2 :UInt64;
}

struct Heartbeat {
  nodeId @0 :Text;
  sequence @1 :UInt64;
  # Sender's clock, microseconds since the Unix epoch.
  timestampUs @2 :UInt64;
  # Load in model units (1.0 = one model replica fully busy).
  load @3 :Float32;
  queueDepth @4 :UInt32;
  kvUsage @5 :List(KvTierUsage);
  # Model units of the work queued and running (a * prompt tokens left +
  # b * output tokens left + c per request); finite, >= 0.
  outstandingUnits @6 :Float64;
  # Model units of work done since the worker started (a per prompt token
  # prefilled, b per token generated, c per request finished); finite,
  # >= 0, never decreasing.
  unitsServed @7 :Float64;
}

# A worker announcing itself to the router: where it is, what it does, and
# what the router needs to compute a prompt's block hashes for it.
struct WorkerJoin {
  workerId @0 :UInt64;
  node @1 :Text;
  actor @2 :Text;
  # prefill, decode, or both.
  roles @3 :List(NodeRole);
  modelFingerprint @4 :UInt64;
  blockTokens @5 :Int32;
  numBlocks @6 :Int32;
  # The engine's block-hash seed (engine::kv_hash_seed of the above and the
  # KV dtype): the router hashes prompts with it.
  hashSeed @7 :UInt64;
  # The worker's model units (engine/model_units.hpp), fitted for its own
  # device: a, b, c, d. All 0 (a sender before them): the router's own.
  unitsA @8 :Float64;
  unitsB @9 :Float64;
  unitsC @10 :Float64;
  unitsD @11 :Float64;
}
