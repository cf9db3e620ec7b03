// The unbounded-cache optimum of a trace: by hand on the synthetic fixture
// (tests/bench/data/README.md), and the published figure on the Mooncake
// conversation trace when that file is present.
#include "bench/trace_cache_optimum.hpp"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "tests/bench/trace_test_util.hpp"

namespace {

using tessera::bench::load_mooncake_trace;
using tessera::bench::optimal_prefix_hits;
using tessera::bench::optimal_prefix_reuse;
using tessera::bench::select_requests;
using tessera::bench::trace_parse_options;
using tessera::bench::trace_request;
using tessera::bench::trace_selection;

using tessera::bench::test::req;

TEST(TraceCacheOptimumTest, MatchesTheHandComputedFixture) {
  trace_parse_options opts;
  opts.block_tokens = 32;
  auto t = load_mooncake_trace(TESSERA_TEST_DATA_DIR "/shared_prefix_trace.jsonl", opts);
  ASSERT_TRUE(t) << tessera::error_text(t.error());
  EXPECT_EQ(optimal_prefix_hits(t->requests, 32), (std::vector<int64_t>{0, 64, 96, 96, 0, 64}));
  auto sum = optimal_prefix_reuse(t->requests, 32);
  EXPECT_EQ(sum.input_tokens, 556);
  EXPECT_EQ(sum.hit_tokens, 320);
  EXPECT_DOUBLE_EQ(sum.rate(), 320.0 / 556.0);
}

TEST(TraceCacheOptimumTest, CountsOnlyALeadingRunOfSeenPrefixes) {
  // Request 2 starts with an unseen id: nothing of it hits, even though its
  // later ids were seen; request 3 repeats id 5 after another prefix.
  std::vector<trace_request> rs{req(1536, {1, 2, 3}), req(1536, {9, 2, 3}), req(1024, {1, 5}),
                                req(1024, {2, 5})};
  EXPECT_EQ(optimal_prefix_hits(rs, 512), (std::vector<int64_t>{0, 0, 512, 0}));
}

TEST(TraceCacheOptimumTest, CapsAHitAtTheInputLength) {
  std::vector<trace_request> rs{req(1000, {1, 2}), req(700, {1, 2})};
  EXPECT_EQ(optimal_prefix_hits(rs, 512), (std::vector<int64_t>{0, 700}));
  EXPECT_EQ(optimal_prefix_reuse({}, 512).rate(), 0.0);
}

// The conversation trace from the Mooncake FAST'25 release, where the
// checkout has it beside it (../shared or ../../shared of the source tree,
// or $TESSERA_MOONCAKE_TRACE).
std::string conversation_trace() {
  if (const char* env = std::getenv("TESSERA_MOONCAKE_TRACE"); env && *env)
    return env;
  for (const char* up : {"/../shared", "/../../shared"}) {
    const std::string p = std::string{TESSERA_SOURCE_DIR} + up + "/traces/mooncake_conversation_trace.jsonl";
    if (std::filesystem::exists(p))
      return p;
  }
  return "";
}

TEST(TraceCacheOptimumTest, ConversationTraceAllowsThePublished37Point4Percent) {
  const auto path = conversation_trace();
  if (path.empty())
    GTEST_SKIP() << "the Mooncake conversation trace is not beside this checkout "
                    "(shared/traces/mooncake_conversation_trace.jsonl; or set TESSERA_MOONCAKE_TRACE)";
  auto t = load_mooncake_trace(path);
  ASSERT_TRUE(t) << tessera::error_text(t.error());
  ASSERT_EQ(t->requests.size(), 12031u);
  EXPECT_EQ(t->out_of_order_lines, 0u);
  auto all = optimal_prefix_reuse(t->requests, 512);
  EXPECT_EQ(all.input_tokens, 144'793'823);
  EXPECT_EQ(all.hit_tokens, 54'098'411);
  EXPECT_NEAR(all.rate(), 0.374, 0.0005);
  trace_selection half_hour;
  half_hour.minutes = 30;
  auto first = optimal_prefix_reuse(select_requests(*t, half_hour), 512);
  EXPECT_EQ(first.input_tokens, 73'604'194);
  EXPECT_EQ(first.hit_tokens, 25'555'226);
  EXPECT_NEAR(first.rate(), 0.347, 0.0005);
}

} // namespace
