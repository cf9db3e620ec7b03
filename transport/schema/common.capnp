# Types shared by several Tessera wire messages. Field numbers (@N) are the
# wire contract: add fields at the end, never renumber or retype one.
@0xfc6c174d285b2eff;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tessera::transport::schema");

# Element type of a KV block (engine::dtype).
enum DType {
  f32 @0;
  f16 @1;
  bf16 @2;
  i8 @3;  # int8 KV with per-token f16 scales in the block (engine/kv_int8.hpp)
}

# Shape of one KV block (engine::kv_layout).
struct KvLayout {
  blockTokens @0 :Int32;
  numLayers @1 :Int32;
  numKvHeads @2 :Int32;
  headDim @3 :Int32;
  kvDtype @4 :DType;
}

# An error sent to a peer: the caf::error category name ("engine",
# "transport", ...), its code within that category, and its message.
struct Error {
  category @0 :Text;
  code @1 :UInt8;
  message @2 :Text;
}

# A KV block's name (engine::kv_block_hash): a keyed, chained 128-bit hash.
struct BlockHash {
  hi @0 :UInt64;
  lo @1 :UInt64;
}

# Storage tier of a KV block: G1 the engine's own pool (device or host),
# G2 the node's host-memory store, G3 disk.
enum KvTier {
  g1Pool @0;
  g2Host @1;
  g3Disk @2;
}
