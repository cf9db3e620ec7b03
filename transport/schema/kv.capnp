# KV-cache block descriptors and KV events. Descriptors name the blocks a
# transfer moves and where; the bytes themselves move by RMA or bulk send.
@0xb11d0f9e3e7dc68b;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tessera::transport::schema");

using Common = import "common.capnp";

struct KvBlockDescriptor {
  # Retired: the 64-bit hash of older builds; never set (blockHash is).
  hash @0 :UInt64;
  # Tokens stored in the block, 1..layout.blockTokens.
  tokenCount @1 :Int32;
  # Byte range in the sender's registered region.
  srcOffset @2 :UInt64;
  sizeBytes @3 :UInt64;
  # Receiver's registered region and byte offset in it.
  dstRegion @4 :UInt32;
  dstOffset @5 :UInt64;
  # XXH3-64 of the block's bytes.
  checksum @6 :UInt64;
  # engine/block_hash.hpp chained hash.
  blockHash @7 :Common.BlockHash;
}

# One batch of blocks moved for one request; completion is per batch.
struct KvTransferBatch {
  batchId @0 :UInt64;
  requestId @1 :UInt64;
  modelFingerprint @2 :UInt64;
  layout @3 :Common.KvLayout;
  blocks @4 :List(KvBlockDescriptor);
}

enum KvEventKind {
  stored @0;
  removed @1;
  cleared @2;
}

# A change to a worker's cached blocks, for the router's prefix index.
struct KvEvent {
  workerId @0 :UInt64;
  eventId @1 :UInt64;
  tier @2 :Common.KvTier;
  kind @3 :KvEventKind;
  # Parent of the first stored block (stored events); absent for a chain
  # that starts at the root.
  hasParent @4 :Bool;
  # Retired: the 64-bit hashes of older builds; never set (a reader
  # refuses an event that has them).
  parentHash @5 :UInt64;
  blockHashes @6 :List(UInt64);
  parent @7 :Common.BlockHash;
  hashes @8 :List(Common.BlockHash);
}

# One destination block granted by the receiver of a KV hand-off.
struct KvBlockGrant {
  # Byte offset in the receiver's region.
  dstOffset @0 :UInt64;
  # False when the receiver already holds the block (a prefix-cache hit):
  # the sender skips it.
  needsData @1 :Bool;
}

# The receiver's answer to a RequestHandoff carrying KV: where each
# exported block goes (one entry per block, in order).
struct KvGrant {
  requestId @0 :UInt64;
  dstRegion @1 :UInt32;
  blocks @2 :List(KvBlockGrant);
}

# A worker asking a kv store for the blocks of a hash chain it lacks.
struct KvFetchRequest {
  # engine::engine::hash_seed of the asker: the blocks' namespace.
  ns @0 :UInt64;
  # Retired: the 64-bit hashes of older builds; never set.
  blockHashes @1 :List(UInt64);
  # Most payload bytes the reply may carry.
  maxBytes @2 :UInt64;
  # Consecutive blocks of one chain, in order.
  hashes @3 :List(Common.BlockHash);
  # How long the asker waits for the reply, ms (0: not said).
  waitMs @4 :UInt32;
}

# One block of a KvFetchReply, with its bytes.
struct KvFetchedBlock {
  # Retired: the 64-bit hash of older builds; never set (blockHash is).
  hash @0 :UInt64;
  tokenCount @1 :Int32;
  # XXH3-64 of data.
  checksum @2 :UInt64;
  data @3 :Data;
  blockHash @4 :Common.BlockHash;
}

# The leading blocks of the asked chain a store holds, in order.
struct KvFetchReply {
  layout @0 :Common.KvLayout;
  blocks @1 :List(KvFetchedBlock);
  # Stopped at maxBytes (more may be there), not at a miss.
  more @2 :Bool;
  # The store was at its bound of fetches in flight and read nothing:
  # compute now rather than wait.
  busy @3 :Bool;
}
