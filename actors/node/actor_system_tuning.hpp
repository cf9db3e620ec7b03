#pragma once
/// @file
/// The CAF scheduler settings every Tessera process starts with.
///
/// The heavy work (engine steps) runs on detached worker actors and the
/// engine's own threads; the scheduler's threads only carry the frontend,
/// the router and the bridge. CAF's work-stealing default keeps idle
/// scheduler threads polling every 50 us ("moderate" polling), which
/// preempts the compute threads thousands of times a second: on the 2-core
/// machine it cost 10-20% of the engine's tokens/s (bench/README.md,
/// Serving). Here an idle scheduler thread spins briefly, then sleeps on its
/// condition variable until work is enqueued, and the pool is small.

#include <caf/actor_system_config.hpp>

namespace tessera::actors {

/// Scheduler threads used when the command line does not say.
inline constexpr int default_actor_threads = 2;

/// Applies the settings to `cfg`; `threads` <= 0 means default_actor_threads.
void tune_actor_system(caf::actor_system_config& cfg, int threads = 0);

} // namespace tessera::actors
