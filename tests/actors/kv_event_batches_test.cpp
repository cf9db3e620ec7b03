// A worker's prefix-cache changes as the router's kv_event batches
// (actors/worker/kv_event_batches.hpp), and the request shapes of
// request_start.hpp that need no engine.
#include "actors/worker/kv_event_batches.hpp"
#include "actors/worker/request_start.hpp"

#include <gtest/gtest.h>

#include "transport/wire/limits.hpp"

namespace tessera::actors {
namespace {

namespace wire = transport::wire;
using kind = engine::kv_cache_event::kind;

engine::kv_cache_event change(kind k, uint64_t lo) {
  return {k, {0, lo}};
}

TEST(KvEventBatchesTest, OneEventPerRunOfSameKindChangesNumberedInOrder) {
  std::vector<engine::kv_cache_event> changes{change(kind::stored, 1), change(kind::stored, 2),
                                              change(kind::removed, 1), change(kind::cleared, 0),
                                              change(kind::stored, 3)};
  uint64_t next = 5;
  auto evs = kv_event_batches(changes, 42, next);
  ASSERT_EQ(evs.size(), 4u);
  EXPECT_EQ(next, 9u);
  EXPECT_EQ(evs[0].kind, wire::kv_event_kind::stored);
  EXPECT_EQ(evs[0].block_hashes.size(), 2u);
  EXPECT_EQ(evs[0].event_id, 5u);
  EXPECT_EQ(evs[0].worker_id, 42u);
  EXPECT_EQ(evs[1].kind, wire::kv_event_kind::removed);
  EXPECT_EQ(evs[2].kind, wire::kv_event_kind::cleared);
  EXPECT_TRUE(evs[2].block_hashes.empty());
  EXPECT_EQ(evs[3].event_id, 8u);
  EXPECT_TRUE(kv_event_batches({}, 42, next).empty());
  EXPECT_EQ(next, 9u) << "no change, no event id used";
}

TEST(KvEventBatchesTest, TheWholeViewIsAClearThenStoredEventsWithinTheWireLimit) {
  const size_t limit = wire::wire_limits{}.max_event_hashes;
  std::vector<engine::kv_block_hash> all;
  for (uint64_t i = 0; i < limit + 3; ++i)
    all.push_back({1, i});
  uint64_t next = 0;
  auto evs = kv_view_events(all, 7, next);
  ASSERT_EQ(evs.size(), 3u);
  EXPECT_EQ(evs[0].kind, wire::kv_event_kind::cleared);
  EXPECT_EQ(evs[1].block_hashes.size(), limit);
  EXPECT_EQ(evs[2].block_hashes.size(), 3u);
  EXPECT_EQ(evs[2].block_hashes.back(), all.back());
  EXPECT_EQ(next, 3u);
  auto empty = kv_view_events({}, 7, next);
  ASSERT_EQ(empty.size(), 1u) << "an empty cache is still announced as cleared";
}

TEST(RequestStartTest, APrefillForAnotherWorkerComputesOneTokenAndHoldsItsKv) {
  wire::request_handoff h;
  h.request.prompt = {1, 2, 3, 4};
  h.request.params.max_tokens = 10;
  h.request.params.min_tokens = 5;
  h.decode_at = {"d", "decode"};
  engine::model_units u; // a = b = 1, c = 0
  auto s = plan_start(h, u);
  EXPECT_TRUE(s.prefill_only);
  EXPECT_TRUE(s.request.keep_kv);
  EXPECT_TRUE(s.request.continues_elsewhere);
  EXPECT_EQ(s.request.params.max_tokens, 1);
  EXPECT_EQ(s.request.params.min_tokens, 1);
  EXPECT_DOUBLE_EQ(s.units, 4 + 1);
  // One token wanted: this worker does it all.
  h.request.params.max_tokens = 1;
  EXPECT_FALSE(plan_start(h, u).prefill_only);
}

TEST(RequestStartTest, AResumedStreamCountsOnlyTheTokensLeftAndKeepsTheRequestAsIs) {
  wire::request_handoff h;
  h.request.prompt = {1, 2, 3};
  h.request.params.max_tokens = 10;
  h.request.params.seed = 9;
  h.resume_output = {5, 6, 7, 8};
  engine::model_units u;
  auto s = plan_start(h, u);
  EXPECT_FALSE(s.prefill_only);
  EXPECT_FALSE(s.request.keep_kv);
  EXPECT_EQ(s.request.params.max_tokens, 10) << "the request passes through untouched";
  EXPECT_EQ(s.request.params.seed, std::optional<uint64_t>{9});
  // The tokens left to generate, and the prompt plus the output so far as
  // context: the resuming worker recomputes all of it (a * 7 + b * 6).
  EXPECT_EQ(s.output_left, 6);
  EXPECT_EQ(s.context, 3 + 4);
  EXPECT_DOUBLE_EQ(s.units, (3 + 4) + 6);
}

} // namespace
} // namespace tessera::actors
