// The chaos scenario file: strict reading (every problem at once, named),
// defaults, sorting, scaling, node checks; and every shipped scenario reads.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chaos/scenario.hpp"
#include "cluster/cluster_config.hpp"
#include "common/error.hpp"

namespace {

using namespace tessera::chaos;

TEST(ChaosScenarioTest, ReadsEveryKeyAndSortsEventsByTime) {
  auto s = parse_scenario(R"(
name = "mix"
description = "two faults"
duration_s = 12.5
grace_s = 3
seed = 9
[load]
rate = 2.5
prompt_tokens = [4, 16]
max_tokens = 20
seeded_fraction = 0.25
temperature = 1.2
[[event]]
at_s = 7
action = "faults"
node = "decode-a"
plan = "seed=1; drop,p=0.01"
[[event]]
at_s = 2
action = "kill"
node = "prefill"
)",
                          "mix.toml");
  ASSERT_TRUE(s) << tessera::error_text(s.error());
  EXPECT_EQ(s->name, "mix");
  EXPECT_EQ(s->description, "two faults");
  EXPECT_DOUBLE_EQ(s->duration_s, 12.5);
  EXPECT_DOUBLE_EQ(s->grace_s, 3);
  EXPECT_EQ(s->seed, 9u);
  EXPECT_DOUBLE_EQ(s->load.rate, 2.5);
  EXPECT_EQ(s->load.prompt_tokens_min, 4);
  EXPECT_EQ(s->load.prompt_tokens_max, 16);
  EXPECT_EQ(s->load.max_tokens, 20);
  EXPECT_DOUBLE_EQ(s->load.seeded_fraction, 0.25);
  EXPECT_DOUBLE_EQ(s->load.temperature, 1.2);
  ASSERT_EQ(s->events.size(), 2u);
  EXPECT_EQ(s->events[0].action, event_action::kill);
  EXPECT_EQ(s->events[0].node, "prefill");
  EXPECT_EQ(s->events[1].action, event_action::faults);
  EXPECT_EQ(s->events[1].plan, "seed=1; drop,p=0.01");
  EXPECT_TRUE(s->uses_faults());
}

TEST(ChaosScenarioTest, DefaultsWhereKeysAreMissingAndNameFromTheFile) {
  auto s = parse_scenario("", "/some/dir/quiet.toml");
  ASSERT_TRUE(s) << tessera::error_text(s.error());
  EXPECT_EQ(s->name, "quiet");
  EXPECT_DOUBLE_EQ(s->duration_s, 20);
  EXPECT_DOUBLE_EQ(s->grace_s, 15);
  EXPECT_DOUBLE_EQ(s->load.rate, 4);
  EXPECT_EQ(s->load.max_tokens, 48);
  EXPECT_TRUE(s->events.empty());
  EXPECT_FALSE(s->uses_faults());
}

TEST(ChaosScenarioTest, ReportsEveryProblemAtOnceNamingTheKey) {
  auto s = parse_scenario(R"(
duraton_s = 5
duration_s = 10
grace_s = 2
[load]
rate = 0
prompt_tokens = [9, 3]
[[event]]
at_s = 1
action = "kil"
node = "a"
[[event]]
at_s = 2
action = "kill"
node = "a"
plan = "drop"
[[event]]
at_s = 3
action = "faults"
node = "b"
[[event]]
at_s = 12
action = "stop"
[[event]]
at_s = 4
action = "cont"
node = "c"
when = 3
)",
                          "bad.toml");
  ASSERT_FALSE(s);
  const auto text = tessera::error_message(s.error());
  for (const char* want : {"bad.toml: unknown key 'duraton_s'; did you mean 'duration_s'?",
                           "'load.rate' must be a number in (0, 10000], got 0",
                           "'load.prompt_tokens' must be [lo, hi]",
                           "event[0].action: unknown action 'kil'; did you mean 'kill'?",
                           "event[1].plan is only for action = \"faults\"",
                           "event[2] is a faults event without a plan",
                           "event[3].node is missing",
                           "event[3].at_s = 12 is after the run (duration_s + grace_s = 12)",
                           "unknown key 'event[4].when'"})
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << text;
}

TEST(ChaosScenarioTest, ASyntaxErrorNamesTheLine) {
  auto s = parse_scenario("duration_s = 5\n[load\nrate = 1\n", "x.toml");
  ASSERT_FALSE(s);
  EXPECT_NE(tessera::error_message(s.error()).find("(line 2)"), std::string::npos)
    << tessera::error_message(s.error());
}

TEST(ChaosScenarioTest, ScalingShortensTheLoadAndEventsButNotTheGrace) {
  auto s = parse_scenario("duration_s = 20\ngrace_s = 10\n[[event]]\nat_s = 8\naction = \"kill\"\nnode = \"a\"\n",
                          "s.toml");
  ASSERT_TRUE(s);
  const auto short_run = scale_scenario(*s, 0.25);
  EXPECT_DOUBLE_EQ(short_run.duration_s, 5);
  EXPECT_DOUBLE_EQ(short_run.grace_s, 10);
  EXPECT_DOUBLE_EQ(short_run.events[0].at_s, 2);
  EXPECT_DOUBLE_EQ(short_run.load.rate, s->load.rate);
}

TEST(ChaosScenarioTest, AnEventOnANodeNotInTheClusterIsNamedWithTheNearestId) {
  auto s = parse_scenario("[[event]]\nat_s = 1\naction = \"kill\"\nnode = \"decode-c\"\n", "s.toml");
  ASSERT_TRUE(s);
  auto problems = check_scenario_nodes(*s, {"front", "decode-a", "decode-b"});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("'decode-c' is not a node of the cluster"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("did you mean"), std::string::npos) << problems[0];
  EXPECT_TRUE(check_scenario_nodes(*s, {"decode-c"}).empty());
}

TEST(ChaosScenarioTest, EveryShippedScenarioReadsAndNamesNodesOfTheShippedCluster) {
  const std::filesystem::path dir = std::filesystem::path{TESSERA_SOURCE_DIR} / "configs" / "chaos";
  size_t n = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".toml" || f.path().filename().string().starts_with("cluster"))
      continue;
    ++n;
    auto s = load_scenario(f.path());
    ASSERT_TRUE(s) << tessera::error_text(s.error());
    EXPECT_FALSE(s->description.empty()) << f.path();
    EXPECT_FALSE(s->events.empty()) << f.path();
    EXPECT_TRUE(check_scenario_nodes(*s, {"front", "prefill", "decode-a", "decode-b"}).empty()) << f.path();
  }
  EXPECT_GE(n, 6u);
}

TEST(ChaosScenarioTest, EachScenarioFolderHasAClusterItsScenariosNameNodesOf) {
  const std::filesystem::path dir = std::filesystem::path{TESSERA_SOURCE_DIR} / "configs" / "chaos";
  size_t folders = 0;
  for (const auto& sub : std::filesystem::directory_iterator(dir)) {
    if (!sub.is_directory())
      continue;
    ++folders;
    std::ifstream in{sub.path() / "cluster.toml"};
    ASSERT_TRUE(in) << sub.path() << " has no cluster.toml (scripts/chaos-all.sh runs its scenarios against it)";
    std::stringstream text;
    text << in.rdbuf();
    auto c = tessera::cluster::read_cluster_config(text.str(), (sub.path() / "cluster.toml").string());
    ASSERT_TRUE(c.problems.empty()) << c.problems.front();
    std::vector<std::string> ids;
    for (const auto& n : c.config.nodes)
      ids.push_back(n.id);
    size_t n = 0;
    for (const auto& f : std::filesystem::directory_iterator(sub.path())) {
      if (f.path().extension() != ".toml" || f.path().filename().string().starts_with("cluster"))
        continue;
      ++n;
      auto s = load_scenario(f.path());
      ASSERT_TRUE(s) << tessera::error_text(s.error());
      EXPECT_FALSE(s->description.empty()) << f.path();
      EXPECT_FALSE(s->events.empty()) << f.path();
      EXPECT_TRUE(check_scenario_nodes(*s, ids).empty()) << f.path();
      if (!s->disk_fault_nodes().empty())
        EXPECT_FALSE(c.config.kvstore_disk_dir.empty()) << f.path() << ": disk events need a disk tier";
    }
    EXPECT_GE(n, 1u) << sub.path();
  }
  EXPECT_GE(folders, 2u); // routers/, disk/
}

} // namespace
