// The router's prefix index cap (router_config::index) as an actor: past
// max_entries the oldest entries are forgotten, and /metrics shows the
// index's size and how many it dropped, so an operator sees a cap below
// what the cluster caches (issue 14: four nodes' stores passed 2^21).

#include "actors/router/router_actor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cluster/metrics.hpp"
#include "common/error.hpp"
#include "tests/support/block_hash_util.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

/// A stored event of `n` chained stand-in hashes from worker `worker`.
wire::kv_event stored(uint64_t worker, uint64_t event_id, size_t n) {
  wire::kv_event ev;
  ev.worker_id = worker;
  ev.event_id = event_id;
  ev.kind = wire::kv_event_kind::stored;
  for (size_t i = 0; i < n; ++i)
    ev.block_hashes.push_back(tessera::test::bh(1000 + event_id * 100 + i));
  return ev;
}

TEST(RouterIndexCapTest, PastTheCapTheOldestAreDroppedAndCounted) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto metrics = std::make_shared<cluster::metrics_registry>();
  router_config rc;
  rc.metrics = metrics;
  rc.index.max_entries = 4;
  auto r = spawn_router(sys, rc);
  ASSERT_TRUE(r) << error_text(r.error());
  self->send(*r, kv_events_atom_v, stored(7, 0, 3));
  self->send(*r, kv_events_atom_v, stored(7, 1, 7));
  // The router publishes on its tick (every 250 ms without canaries).
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text = metrics->render();
    if (text.find("tessera_router_index_evicted_entries_total 6") != std::string::npos)
      break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_NE(text.find("tessera_router_index_evicted_entries_total 6"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_router_index_entries 4"), std::string::npos) << text;
  caf::anon_send_exit(*r, caf::exit_reason::user_shutdown);
}

TEST(RouterIndexCapTest, TheDefaultCapHoldsEightMillionEntries) {
  EXPECT_EQ(router_config{}.index.max_entries, size_t{1} << 23);
}

} // namespace
} // namespace tessera::actors
