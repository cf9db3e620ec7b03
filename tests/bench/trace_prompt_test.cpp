// Expanding trace requests into prompts: deterministic, in range, and
// sharing exactly the tokens the trace says two requests share.
#include "bench/trace_prompt.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "tests/bench/trace_test_util.hpp"

namespace {

using tessera::bench::parse_token_range;
using tessera::bench::token_range;
using tessera::bench::trace_prompt;
using tessera::bench::trace_request;

using tessera::bench::test::req;

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

TEST(TracePromptTest, IsDeterministicAndExactlyInputLengthLong) {
  const auto r = req(1300, {4, 8, 15});
  const auto a = trace_prompt(r, 512, 0, {});
  EXPECT_EQ(a.size(), 1300u);
  EXPECT_EQ(a, trace_prompt(r, 512, 0, {}));
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](int32_t t) { return t >= 8 && t <= 263; }));
  // Not degenerate: a 512-token block uses most of the 256 ids.
  std::vector<bool> used(264);
  for (size_t i = 0; i < 512; ++i)
    used[static_cast<size_t>(a[i])] = true;
  EXPECT_GT(std::count(used.begin(), used.end(), true), 200);
}

TEST(TracePromptTest, RequestsSharingKIdsShareExactlyKBlocks) {
  for (int64_t bt : {32, 512}) {
    const auto base = trace_prompt(req(3 * bt + 7, {1, 2, 3, 4}), bt, 0, {});
    for (size_t k = 0; k <= 3; ++k) {
      std::vector<int64_t> ids{1, 2, 3, 4};
      for (size_t i = k; i < ids.size(); ++i)
        ids[i] = 100 + static_cast<int64_t>(i); // differs from block k on
      const auto other = trace_prompt(req(4 * bt, ids), bt, 0, {});
      // Equal through k blocks, different at the first token after (a
      // chance equality of one token would show up here as k*bt + 1).
      EXPECT_EQ(common_prefix(base, other), k * static_cast<size_t>(bt)) << "block " << bt << ", k " << k;
    }
  }
}

TEST(TracePromptTest, TheLastBlockIsAPrefixOfTheWholeBlock) {
  const auto partial = trace_prompt(req(50, {6, 7}), 32, 0, {});
  const auto whole = trace_prompt(req(90, {6, 7, 8}), 32, 0, {});
  ASSERT_EQ(partial.size(), 50u);
  EXPECT_EQ(common_prefix(partial, whole), 50u);
}

TEST(TracePromptTest, SeedAndRangeChangeTheTokensNotTheSharing) {
  const auto r = req(64, {1, 2});
  const auto a = trace_prompt(r, 32, 0, {});
  const auto b = trace_prompt(r, 32, 1, {});
  EXPECT_LT(common_prefix(a, b), 4u);
  const token_range llama{1000, 128255};
  const auto c = trace_prompt(r, 32, 0, llama);
  EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](int32_t t) { return t >= 1000 && t <= 128255; }));
  EXPECT_EQ(common_prefix(c, trace_prompt(req(64, {1, 3}), 32, 0, llama)), 32u);
  const auto one = trace_prompt(r, 32, 0, token_range{42, 42});
  EXPECT_TRUE(std::all_of(one.begin(), one.end(), [](int32_t t) { return t == 42; }));
}

TEST(TracePromptTest, ParsesTokenRanges) {
  auto r = parse_token_range("8:263");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->lo, 8);
  EXPECT_EQ(r->hi, 263);
  for (const char* bad : {"", "8", "8-263", "a:9", "9:8", "-1:5", "1:99999999999", "1:2x"}) {
    auto e = parse_token_range(bad);
    ASSERT_FALSE(e) << bad;
    const std::string quoted = std::string{"'"}.append(bad).append("'");
    EXPECT_NE(tessera::error_message(e.error()).find(quoted), std::string::npos);
  }
}

} // namespace
