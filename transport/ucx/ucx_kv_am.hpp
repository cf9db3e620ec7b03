#pragma once
/// @file
/// Internal to transport/ucx: the byte layout and the checks of the
/// rendezvous KV path (ucx_kv_path::am_rndv). No UCX types here, so the
/// layout and the receiver's checks are unit-tested without a connection.
///
/// One batch, sender -> receiver (all on one endpoint):
///
///   sender                                          receiver
///   am_kv_batch (eager): seq, batch_id,   ------->  kv_incoming[seq]: the
///     run count, every block_copy                   batch, runs expected
///   am_kv_block x runs (rendezvous, or    ------->  check header against
///     eager up to kv_eager_max_bytes):              own regions (and the
///     header kv_block_header, data =                sender's grants); receive
///     the run's source bytes (zero-copy)            into region + offset, or
///                                                   copy an eager run there
///                                                   (or drop, count, log,
///                                                   and reject the batch)
///                                                   ... every run landed:
///                                                   on_blocks_arrived
///                                         <-------  am_kv_ack: seq, ok /
///   `done` once every run's send                      rejected + reason
///   completed and the ack came (an
///   error at once: a failed send, a rejection, the peer's failure)
///
/// `seq` is the sender transport's own counter (unique per sender; the
/// caller's batch_id need not be unique). Every number is in the host's
/// byte order, as in ucx_support.hpp.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "transport/transport.hpp"
#include "transport/ucx/ucx_support.hpp"

namespace tessera::transport::detail {

/// Blocks that are back to back both in the source and in the destination
/// region, sent as one message: the runs of a batch, in batch order.
struct kv_run {
  region_id src = 0;
  uint64_t src_offset = 0;
  region_id dst = 0;
  uint64_t dst_offset = 0;
  uint64_t size = 0;         // bytes
  uint32_t first_block = 0;  // index into the batch's blocks
  uint32_t block_count = 0;
};

/// Merges each block into the previous run where it continues it in both
/// regions. Blocks are assumed checked (non-empty, in range).
[[nodiscard]] std::vector<kv_run> kv_runs(const std::vector<block_copy>& blocks);

/// Whether rendezvous is worth it for a batch of `runs` (kv_runs) when
/// ucx_kv_path::automatic resolved to am_rndv: every run pays one
/// rendezvous handshake, so runs averaging fewer than `min_run_bytes` go
/// by put instead. Measured over tcp on loopback with `tessera bench
/// transport --kv-path put,am_rndv` before wire security took RMA off tcp
/// (git history of bench/README.md): runs of 64 KiB 2.3 GB/s by rendezvous
/// against 3.5 by put, runs of 1 MiB 6.6-6.8 against 3.6-4.7.
[[nodiscard]] bool rndv_pays(const std::vector<kv_run>& runs, uint64_t min_run_bytes);

/// The header of one am_kv_block message: where its data goes.
struct kv_block_header {
  uint64_t seq = 0;        // the batch (sender's counter)
  uint32_t run = 0;        // index of this run in the batch
  region_id dst = 0;       // the receiver's region
  uint64_t dst_offset = 0; // bytes into it
  uint64_t size = 0;       // bytes of data
};

/// Encoded size of a kv_block_header, bytes.
inline constexpr size_t kv_block_header_bytes = 8 + 4 + 4 + 8 + 8;

/// Writes `h` into `out` (kv_block_header_bytes bytes).
void encode_block_header(const kv_block_header& h, std::byte* out);

/// Reads a header of exactly kv_block_header_bytes; nullopt otherwise.
[[nodiscard]] std::optional<kv_block_header> decode_block_header(const void* data, size_t length);

/// Why a run may not be received into local memory, "" when it may: `dst`
/// is not a registered region (`region_bytes` nullopt), the run is empty,
/// its data length differs from the header's size, or [dst_offset,
/// dst_offset + size) leaves the region. The same checks as the sender's
/// for the put path, made where the bytes would land.
[[nodiscard]] std::string check_block_target(const kv_block_header& h,
                                             std::optional<uint64_t> region_bytes,
                                             size_t data_length);

/// One block of a batch as both KV paths write it in their batch
/// messages (the put path's am_batch, the rendezvous path's notice): src,
/// src_offset, dst, dst_offset, size.
inline constexpr size_t block_copy_bytes = 4 + 8 + 4 + 8 + 8;
void put_block_copy(writer& w, const block_copy& b);
/// Check rd.ok after it.
[[nodiscard]] block_copy get_block_copy(reader& rd);

/// The am_kv_batch notice.
struct kv_batch_notice {
  uint64_t seq = 0;
  uint32_t runs = 0; // am_kv_block messages that follow
  transfer_batch batch;
};

void encode_batch_notice(writer& w, const kv_batch_notice& n);

/// nullopt when the notice is truncated, has trailing bytes, or its run
/// count is 0 or above its block count.
[[nodiscard]] std::optional<kv_batch_notice> decode_batch_notice(reader& rd);

/// The am_kv_ack message: the batch landed (ok) or was rejected (why).
struct kv_batch_ack {
  uint64_t seq = 0;
  bool ok = true;
  std::string why;
};

void encode_batch_ack(writer& w, const kv_batch_ack& a);
[[nodiscard]] std::optional<kv_batch_ack> decode_batch_ack(reader& rd);

} // namespace tessera::transport::detail
