#pragma once
/// @file
/// A cluster config's `engine` key and [sim] table as the backend choice
/// the workers are built with (internal to actors/node).

#include "cluster/cluster_config.hpp"
#include "engine/factory/backend_factory.hpp"

namespace tessera::actors::detail {

/// The backend `cfg` asks for (engine = "cpu" | "sim", and [sim]). `cfg` is
/// a checked config (load_cluster_config), so every value is valid.
[[nodiscard]] engine::backend_choice backend_choice_of(const cluster::cluster_config& cfg);

} // namespace tessera::actors::detail
