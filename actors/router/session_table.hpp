#pragma once
/// @file
/// Session stickiness: which workers a conversation was routed to, so its
/// next turn goes where its KV blocks are. A bounded table with LRU
/// eviction, keyed by a 64-bit hash of the session id (fixed memory per
/// session whatever the id's length; two ids colliding only share a
/// routing preference, never data).

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace tessera::actors {

/// The workers a session is bound to.
struct session_binding {
  uint64_t decode_worker = 0;
  /// The remote prefill worker of the session's last disaggregated turn;
  /// nullopt if every turn so far prefilled on the decode worker.
  std::optional<uint64_t> prefill_worker;
};

/// Session key -> binding, at most `capacity` entries; putting a new key
/// into a full table forgets the least recently found or put one. About
/// 100 bytes per entry (libstdc++ x86-64). Thread-compatible.
class session_table {
public:
  /// A table for `capacity` sessions; 0 keeps nothing.
  explicit session_table(size_t capacity);

  /// The key of a session id (XXH3-64 with a fixed seed).
  [[nodiscard]] static uint64_t key_of(std::string_view session_id);

  /// The binding of `key`, marked most recently used; nullopt if absent.
  [[nodiscard]] std::optional<session_binding> find(uint64_t key);

  /// Binds `key` (inserts or replaces), marked most recently used.
  void put(uint64_t key, const session_binding& binding);

  /// Forgets `key`; false if it was absent.
  bool erase(uint64_t key);

  [[nodiscard]] size_t size() const { return index_.size(); }
  [[nodiscard]] size_t capacity() const { return capacity_; }
  /// Entries forgotten because the table was full, since construction.
  [[nodiscard]] uint64_t evictions() const { return evictions_; }

private:
  using entry = std::pair<uint64_t, session_binding>;
  size_t capacity_;
  uint64_t evictions_ = 0;
  std::list<entry> lru_; // front: most recently used
  std::unordered_map<uint64_t, std::list<entry>::iterator> index_;
};

} // namespace tessera::actors
