#pragma once
/// @file
/// The bounded queue between host-tier eviction and the disk writer
/// (write-behind). Producers are the threads calling the store (put,
/// promotions); the consumer is the store's spill thread.
///
/// Backpressure: the queue holds at most `capacity_blocks` blocks and
/// `capacity_bytes` payload bytes, counting the block being written. A push
/// into a full queue waits up to its `wait` bound for space; if none frees
/// up, the block is dropped (the caller counts it) and the push returns at
/// once. So host memory is bounded by the host tier's capacity plus this
/// queue's, and a producer stalls at most `wait` per block.
///
///   push ──> [pending, FIFO] ──front()──> writer writes ──done()──> gone
///                 │ find(): readers are served from here meanwhile
///
/// Thread-safety: every member may be called from any thread; one mutex
/// guards the queue and is never held while calling out.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "kvstore/block.hpp"
#include "kvstore/host_tier.hpp"

namespace tessera::kvstore {

/// Bounded FIFO of blocks waiting to be written to disk.
class spill_queue {
public:
  /// What push() did.
  enum class push_result : uint8_t {
    /// Queued for writing.
    queued,
    /// The key is already waiting; nothing added.
    already_queued,
    /// No space within the wait bound (or closed): the block was dropped.
    dropped,
  };

  /// A queue of at most `capacity_blocks` blocks and `capacity_bytes`
  /// payload bytes (a block larger than capacity_bytes is still accepted
  /// into an empty queue, so any block can be spilled).
  spill_queue(size_t capacity_blocks, size_t capacity_bytes);

  /// Appends `b`, waiting up to `wait` for space (see file comment).
  push_result push(const block_key& key, stored_block b, std::chrono::milliseconds wait);

  /// Blocks until a block is ready to be written and returns it (it stays
  /// queued, and visible to find(), until done()); nullopt once closed
  /// and, when closed with drain, empty. While paused, waits.
  [[nodiscard]] std::optional<keyed_block> front();

  /// Removes the block front() returned, freeing its space.
  void done(const block_key& key);

  /// The queued block under `key`, if any.
  [[nodiscard]] std::optional<stored_block> find(const block_key& key) const;

  /// Waits until the queue is empty; false if `timeout` passed first.
  bool wait_empty(std::chrono::milliseconds timeout) const;

  /// Pauses or resumes handing out blocks (tests use it to fill the queue).
  void set_paused(bool paused);

  /// Stops the queue: pushes are dropped from now on, waiting producers are
  /// woken (and drop), and front() returns nullopt at once (`drain` false)
  /// or after the queued blocks (`drain` true; a pause is lifted).
  void close(bool drain);

  /// Blocks queued now (including the one being written).
  [[nodiscard]] size_t blocks() const;
  /// Whether a push of `payload_bytes` would be queued now without waiting.
  [[nodiscard]] bool has_space(size_t payload_bytes) const;
  /// Payload bytes queued now.
  [[nodiscard]] size_t bytes() const;

private:
  bool has_space_locked(size_t payload_bytes) const;

  const size_t capacity_blocks_;
  const size_t capacity_bytes_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::deque<block_key> fifo_;
  std::unordered_map<block_key, stored_block, block_key_hasher> pending_;
  size_t bytes_ = 0;
  size_t handed_out_ = 0; // blocks given by front() and not yet done()
  bool paused_ = false;
  bool closed_ = false;
  bool drain_ = false;
};

} // namespace tessera::kvstore
