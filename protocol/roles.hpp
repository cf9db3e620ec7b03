#pragma once
/// @file
/// The roles a node plays in a cluster (membership, worker joins, launch
/// plans name them).

#include <cstdint>

namespace tessera::protocol {

/// A role a node plays in the cluster.
enum class node_role : uint8_t { frontend, router, prefill, decode, kvstore };

} // namespace tessera::protocol
