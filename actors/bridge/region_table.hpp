#pragma once
/// @file
/// The memory regions a bridge's node registered, for transfers between
/// the node's own regions (internal to actors/bridge).

#include <cstddef>
#include <map>
#include <mutex>
#include <span>

#include <caf/error.hpp>

#include "transport/transport.hpp"

namespace tessera::actors::detail {

/// Region id -> memory. Thread-safe.
class region_table {
public:
  void add(transport::region_id id, std::span<std::byte> memory);

  /// Copies every block of `batch` from its src region to its dst region
  /// (both this node's). Checks every block first; an unknown region or a
  /// range outside one fails the whole batch (invalid_message naming the
  /// block) and copies nothing.
  [[nodiscard]] caf::error copy(const transport::transfer_batch& batch) const;

private:
  mutable std::mutex mu_;
  std::map<transport::region_id, std::span<std::byte>> regions_; // guarded by mu_
};

} // namespace tessera::actors::detail
