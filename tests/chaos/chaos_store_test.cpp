// `tessera chaos` on a cluster whose kv store is a node of its own (front:
// frontend + router; prefill and decode with store = "store"; store:
// roles = ["kvstore"]), of the nano test model, as
// configs/chaos/store/cluster.toml: kill -9 of the store node under a load
// of prompts that share prefixes, then its restart. Every request must be
// answered, none wrong, none lost; the workers' offers reached the store
// before the kill, and the restarted store took offers again (the nodes'
// counters the harness saved when the run ended).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/chaos/chaos_cluster.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

TEST(ChaosStoreTest, KillOfTheStoreNodeLosesNothingAndItsRestartTakesOffersAgain) {
  tessera::test::temp_dir dir{"tessera-chaos-store"};
  const auto config = tessera::test::write_chaos_cluster(dir.path(), "kvstore_host_mb = 16\n",
                                                         {{"front", "\"frontend\", \"router\""},
                                                          {"prefill", "\"prefill\"", "store = \"store\""},
                                                          {"decode", "\"decode\"", "store = \"store\""},
                                                          {"store", "\"kvstore\""}});
  const auto report = dir.path() / "report.json";
  const auto logs = dir.path() / "logs";
  const std::string file = std::string{TESSERA_SOURCE_DIR} + "/configs/chaos/store/kill-store.toml";
  auto r = tessera::test::run_tessera("chaos --config " + config.string() + " --scenario " + file +
                                      " --time-scale 0.5 --grace 5 --json " + report.string() + " --svg " +
                                      (dir.path() / "t.svg").string() + " --logs " + logs.string());
  auto j = tessera::test::read_chaos_report(report);
  tessera::test::expect_clean_chaos_run(r, j, 5); // a dead store only means more to compute
  EXPECT_EQ(j["events"].size(), 2u) << r.out;
  // The workers' offers were stored (before the kill, and after the
  // restart: the counters of a worker node run through both).
  double offered = 0;
  for (const char* id : {"prefill", "decode"})
    offered += tessera::test::metric_sum(tessera::test::read_text(logs / (std::string{id} + ".metrics")),
                                         "tessera_kvstore_offered_blocks_total");
  EXPECT_GT(offered, 0) << r.out;
  // The restarted store node's own counter: offers reached it.
  const auto store = tessera::test::read_text(logs / "store.metrics");
  EXPECT_GT(tessera::test::metric_value(store, "tessera_kvstore_remote_offer_blocks_total{result=\"stored\"}"), 0)
    << store << "\n" << r.out;
}

} // namespace
