#include "actors/node/actor_system_tuning.hpp"

#include <cstddef>

namespace tessera::actors {

void tune_actor_system(caf::actor_system_config& cfg, int threads) {
  // Straight from the short aggressive spin to sleeping: no 50 us polls.
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  cfg.set("scheduler.max-threads", static_cast<size_t>(threads > 0 ? threads : default_actor_threads));
}

} // namespace tessera::actors
