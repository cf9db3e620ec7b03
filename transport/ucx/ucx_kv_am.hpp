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
///                                         <-------  am_kv_acks: every seq
///                                                   that landed since the
///                                                   last ack (sent after
///                                                   each worker progress
///                                                   call), or at once
///                                         <-------  am_kv_ack: seq,
///   `done` once every run's send                      rejected + reason
///   completed and the ack came (an
///   error at once: a failed send, a rejection, the peer's failure)
///
/// A folded batch: where the encoded notice fits kv_folded_notice_max_bytes
/// (and the worker's AM header limit), the sender sends no am_kv_batch;
/// the notice rides in the header of run 0, after its kv_block_header
/// (decode_run_header). A one-run batch is then one message and the ack
/// (the bench's 64 KiB batches over tcp: two messages fewer per batch,
/// the notice and its receive). The receiver takes the notice exactly as
/// an am_kv_batch (same decoder, same bounds) before it checks the run.
///
/// `seq` is the sender transport's own counter (unique per sender; the
/// caller's batch_id need not be unique). Every number is in the host's
/// byte order, as in ucx_support.hpp.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
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

/// Batches that landed, in one am_kv_acks message: every batch of one
/// peer completed within one ucp_worker_progress call is acknowledged
/// together (with 4 batches in flight over tcp, often 2-4 at once), after
/// its on_blocks_arrived, so a batch's `done` still follows it.
void encode_landed_acks(writer& w, std::span<const uint64_t> seqs);
/// nullopt when empty, truncated (a count beyond the bytes present is
/// refused before anything is allocated) or with trailing bytes.
[[nodiscard]] std::optional<std::vector<uint64_t>> decode_landed_acks(reader& rd);

/// The am_kv_ack message: the batch landed (ok) or was rejected (why);
/// rejections go at once, one message each.
struct kv_batch_ack {
  uint64_t seq = 0;
  bool ok = true;
  std::string why;
};

/// Longest notice a run header may carry (a folded batch), bytes: 31
/// blocks (24 + 32 per block). The receiver refuses a longer run header
/// before reading it; the sender folds only what fits this and its
/// worker's max_am_header. Default: 1 KiB.
inline constexpr size_t kv_folded_notice_max_bytes = 1024;

/// A run's header as the receiver reads it: the block header, and on a
/// folded batch's run 0 the batch's notice.
struct kv_run_header {
  kv_block_header block;
  /// Bytes followed the block header: this run claims to carry its
  /// batch's notice.
  bool folded = false;
  /// The notice, when `folded` and it is well formed (decode_batch_notice's
  /// checks, and its seq equals the block header's, and this is run 0);
  /// nullopt for a malformed folded notice (the batch is to be rejected).
  std::optional<kv_batch_notice> notice;
};

/// Writes run 0's header of a folded batch into `out`
/// (kv_block_header_bytes + notice.size() bytes): `h`, then `notice` as
/// encode_batch_notice wrote it (its seq h.seq; h.run 0).
void encode_folded_header(const kv_block_header& h, std::span<const std::byte> notice,
                          std::byte* out);

/// Reads a run header: exactly kv_block_header_bytes (a run), or a block
/// header followed by at most kv_folded_notice_max_bytes of notice (see
/// kv_run_header::notice). nullopt (no batch to blame) when shorter than a
/// block header or longer than both together.
[[nodiscard]] std::optional<kv_run_header> decode_run_header(const void* data, size_t length);

void encode_batch_ack(writer& w, const kv_batch_ack& a);
[[nodiscard]] std::optional<kv_batch_ack> decode_batch_ack(reader& rd);

} // namespace tessera::transport::detail
