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
}
