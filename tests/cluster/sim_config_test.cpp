// A cluster config's `engine` key and [sim] table: read with their
// defaults, and bad values are errors naming the key.
#include <string>

#include <gtest/gtest.h>

#include "cluster/cluster_config.hpp"
#include "common/error.hpp"
#include "engine/sim/sim_gpu.hpp"

namespace {

using namespace tessera::cluster;

const std::string nodes = R"(
[[node]]
id = "front"
address = "127.0.0.1:14000"
roles = ["frontend", "router", "worker"]
)";

TEST(SimConfigTest, DefaultsToTheCpuEngine) {
  auto c = parse_cluster_config(nodes, "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->engine, "cpu");
  EXPECT_EQ(c->sim.gpu, "h100");
  EXPECT_EQ(c->sim.time_scale, 1.0);
  EXPECT_EQ(c->sim.payload_scale, 1);
  EXPECT_FALSE(c->sim.memory_efficiency);
}

TEST(SimConfigTest, ReadsTheSimTable) {
  auto c = parse_cluster_config(R"(
engine = "sim"
kv_cache_mb = 0
[sim]
gpu = "h200"
time_scale = 0.1
payload_scale = 64
tensor_parallel = 2
memory_efficiency = 0.8
compute_efficiency = 0.5
step_overhead_us = 50
gpu_memory_utilization = 0.85
eos_probability = 0.01
)" + nodes,
                                "c.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->engine, "sim");
  EXPECT_EQ(c->kv_cache_mb, 0u);
  EXPECT_EQ(c->sim.gpu, "h200");
  EXPECT_DOUBLE_EQ(c->sim.time_scale, 0.1);
  EXPECT_EQ(c->sim.payload_scale, 64);
  EXPECT_EQ(c->sim.tensor_parallel, 2);
  EXPECT_DOUBLE_EQ(*c->sim.memory_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(*c->sim.compute_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(*c->sim.step_overhead_us, 50.0);
  EXPECT_DOUBLE_EQ(c->sim.gpu_memory_utilization, 0.85);
  EXPECT_DOUBLE_EQ(c->sim.eos_probability, 0.01);
}

TEST(SimConfigTest, BadEngineSettingsAreErrorsNamingTheKey) {
  struct bad_case {
    std::string text;
    std::string says;
  };
  const bad_case cases[] = {
    {"engine = \"gpu\"\n", "'engine' must be cpu or sim, got 'gpu'"},
    {"engine = 3\n", "'engine' must be a string"},
    {"[sim]\ngpu = \"b200\"\n", "'sim.gpu' must be one of a100, h100, h200, got 'b200'"},
    {"[sim]\ntime_scale = -1\n", "'sim.time_scale'"},
    {"[sim]\npayload_scale = 0\n", "'sim.payload_scale'"},
    {"[sim]\npayload_scale = 1.5\n", "'sim.payload_scale'"},
    {"[sim]\nmemory_efficiency = 2\n", "'sim.memory_efficiency'"},
    {"[sim]\ncompute_efficiency = \"fast\"\n", "'sim.compute_efficiency'"},
    {"[sim]\ngpus = \"h100\"\n", "unknown key 'sim.gpus'"},
    {"sim = 3\n", "'sim' must be a table"},
  };
  for (const auto& b : cases) {
    auto c = parse_cluster_config(b.text + nodes, "bad.toml");
    ASSERT_FALSE(c) << b.text;
    const auto msg = tessera::error_text(c.error());
    EXPECT_NE(msg.find("bad.toml"), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.says), std::string::npos) << msg << "\nwanted: " << b.says;
  }
}

TEST(SimConfigTest, TheExampleSimClusterConfigReads) {
  auto c = load_cluster_config(TESSERA_SOURCE_DIR "/configs/sim-4p4d.toml");
  ASSERT_TRUE(c) << tessera::error_text(c.error());
  EXPECT_EQ(c->engine, "sim");
  EXPECT_EQ(c->sim.payload_scale, 64);
  EXPECT_EQ(c->node("prefill")->workers, 4);
  EXPECT_EQ(c->node("decode")->workers, 4);
}

TEST(SimConfigTest, AcceptsExactlyTheSimBackendsGpus) {
  EXPECT_EQ(sim_gpu_names(), tessera::engine::sim::gpu_names());
}

} // namespace
