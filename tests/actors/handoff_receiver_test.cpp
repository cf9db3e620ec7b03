// The decode side of a KV hand-off as a plain state machine
// (actors/worker/handoff_receiver.hpp): grants, waiting for blocks in
// order, commits, cancels, expiries and duplicates, with a pool of counted
// blocks instead of an engine and no actor system.
#include "actors/worker/handoff_receiver.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;
using engine::engine_errc;
using clock_type = handoff_receiver::clock;

/// A pool of `free` blocks; each hand-off takes one. A hand-off whose
/// request has an empty prompt is refused outright (as the engine refuses a
/// mismatched export).
struct counted_pool {
  int free = 0;
  int reserves = 0;
  handoff_receiver::reserve_fn fn() {
    return [this](const wire::request_handoff& h) -> caf::expected<wire::kv_grant> {
      ++reserves;
      if (h.request.prompt.empty())
        return engine::make_engine_error(engine_errc::kv_mismatch, "no prompt");
      if (free == 0)
        return engine::make_engine_error(engine_errc::no_free_blocks, "full");
      --free;
      wire::kv_grant g;
      g.request_id = h.request.id;
      g.dst_region = 7;
      return g;
    };
  }
};

wire::request_handoff handoff(uint64_t id, int32_t max_tokens = 10) {
  wire::request_handoff h;
  h.request.id = id;
  h.request.prompt = {1, 2, 3};
  h.request.params.max_tokens = max_tokens;
  h.request.cache_salt = "salt";
  h.reply_to = {"front", "sink"};
  h.kv.emplace();
  h.kv->tokens = {1, 2, 3, 4};
  return h;
}

std::string text(const caf::error& e) {
  return error_text(e);
}

TEST(HandoffReceiverTest, GrantsAtOnceAndHandsTheGrantOverOnCommit) {
  const auto t0 = clock_type::now();
  counted_pool pool{2};
  handoff_receiver rx{"decode", 30s};
  auto a = rx.offered(handoff(1, 5), 11, t0, pool.fn());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].ticket, 11u);
  ASSERT_TRUE(a[0].grant) << text(a[0].grant.error());
  EXPECT_EQ(a[0].grant->request_id, 1u);
  EXPECT_TRUE(rx.holds(1));
  auto g = rx.commit(1);
  ASSERT_TRUE(g) << text(g.error());
  EXPECT_EQ(g->reply_to.actor, "sink");
  EXPECT_EQ(g->tokens, (std::vector<int32_t>{1, 2, 3, 4})) << "the export's tokens, for the store's offer";
  EXPECT_EQ(g->cache_salt, "salt");
  EXPECT_EQ(g->max_tokens, 5);
  EXPECT_EQ(g->deadline, t0 + 30s);
  EXPECT_FALSE(rx.holds(1));
  auto again = rx.commit(1);
  ASSERT_FALSE(again) << "a commit counts once";
  EXPECT_NE(text(again.error()).find("worker decode granted no hand-off for request 1"), std::string::npos)
    << text(again.error());
}

TEST(HandoffReceiverTest, HandOffsThatDoNotFitWaitAndAreGrantedInOrderAsBlocksFree) {
  const auto t0 = clock_type::now();
  counted_pool pool{1};
  handoff_receiver rx{"decode", 30s};
  ASSERT_EQ(rx.offered(handoff(1), 1, t0, pool.fn()).size(), 1u);
  EXPECT_TRUE(rx.offered(handoff(2), 2, t0, pool.fn()).empty()) << "no block free: it waits";
  EXPECT_TRUE(rx.offered(handoff(3), 3, t0, pool.fn()).empty());
  EXPECT_EQ(rx.num_waiting(), 2u);
  EXPECT_TRUE(rx.retry(t0 + 1s, pool.fn()).empty()) << "still nothing free";
  pool.free = 1; // request 1 finished
  auto a = rx.retry(t0 + 2s, pool.fn());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].ticket, 2u) << "first come, first served";
  ASSERT_TRUE(a[0].grant);
  EXPECT_EQ(rx.num_waiting(), 1u);
  pool.free = 1;
  a = rx.retry(t0 + 3s, pool.fn());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].ticket, 3u);
  EXPECT_EQ(rx.commit(3)->deadline, t0 + 3s + 30s) << "the grant's deadline runs from the grant";
}

TEST(HandoffReceiverTest, ANewHandOffDoesNotOvertakeTheOnesWaiting) {
  const auto t0 = clock_type::now();
  counted_pool pool{0};
  handoff_receiver rx{"decode", 30s};
  EXPECT_TRUE(rx.offered(handoff(1), 1, t0, pool.fn()).empty());
  pool.free = 1;
  const int before = pool.reserves;
  EXPECT_TRUE(rx.offered(handoff(2), 2, t0, pool.fn()).empty()) << "it queues behind request 1";
  EXPECT_EQ(pool.reserves, before) << "no reservation tried past the queue";
  auto a = rx.retry(t0, pool.fn());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].ticket, 1u);
}

TEST(HandoffReceiverTest, AWaitingHandOffPastItsDeadlineIsRefusedAndTheNextIsTried) {
  const auto t0 = clock_type::now();
  counted_pool pool{0};
  handoff_receiver rx{"decode", 10s};
  EXPECT_TRUE(rx.offered(handoff(1), 1, t0, pool.fn()).empty());
  EXPECT_TRUE(rx.offered(handoff(2), 2, t0 + 5s, pool.fn()).empty());
  pool.free = 1;
  auto a = rx.retry(t0 + 11s, pool.fn());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].ticket, 1u);
  ASSERT_FALSE(a[0].grant);
  EXPECT_EQ(a[0].grant.error(), engine_errc::no_free_blocks);
  EXPECT_NE(text(a[0].grant.error()).find("worker decode freed too few KV blocks for request 1 within the hand-off"),
            std::string::npos)
    << text(a[0].grant.error());
  EXPECT_EQ(a[1].ticket, 2u);
  EXPECT_TRUE(a[1].grant) << "request 2 is within its own deadline";
}

TEST(HandoffReceiverTest, ARefusalOtherThanNoRoomIsAnsweredAtOnceAndDoesNotBlockTheQueue) {
  const auto t0 = clock_type::now();
  counted_pool pool{0};
  handoff_receiver rx{"decode", 10s};
  auto bad = handoff(1);
  bad.request.prompt.clear();
  auto a = rx.offered(bad, 1, t0, pool.fn());
  ASSERT_EQ(a.size(), 1u);
  ASSERT_FALSE(a[0].grant);
  EXPECT_EQ(a[0].grant.error(), engine_errc::kv_mismatch);
  EXPECT_FALSE(rx.holds(1));
  // Refused while others wait: answered when its turn comes, then the next.
  EXPECT_TRUE(rx.offered(handoff(2), 2, t0, pool.fn()).empty());
  EXPECT_TRUE(rx.offered(bad, 3, t0, pool.fn()).empty());
  EXPECT_TRUE(rx.offered(handoff(4), 4, t0, pool.fn()).empty());
  pool.free = 2;
  a = rx.retry(t0, pool.fn());
  ASSERT_EQ(a.size(), 3u);
  EXPECT_TRUE(a[0].grant);
  EXPECT_FALSE(a[1].grant);
  EXPECT_TRUE(a[2].grant);
}

TEST(HandoffReceiverTest, ADuplicateHandOffIsRefusedAndTheFirstGrantStands) {
  const auto t0 = clock_type::now();
  counted_pool pool{2};
  handoff_receiver rx{"decode", 30s};
  ASSERT_TRUE(rx.offered(handoff(1), 1, t0, pool.fn())[0].grant);
  auto dup = rx.offered(handoff(1), 2, t0, pool.fn());
  ASSERT_EQ(dup.size(), 1u);
  EXPECT_EQ(dup[0].ticket, 2u);
  ASSERT_FALSE(dup[0].grant);
  EXPECT_NE(text(dup[0].grant.error()).find("already holds a hand-off of request 1"), std::string::npos);
  EXPECT_EQ(pool.free, 1) << "no second reservation";
  EXPECT_TRUE(rx.commit(1)) << "the first grant still commits";
  // The same for a duplicate of one that waits.
  pool.free = 0;
  EXPECT_TRUE(rx.offered(handoff(5), 3, t0, pool.fn()).empty());
  auto dup2 = rx.offered(handoff(5), 4, t0, pool.fn());
  ASSERT_EQ(dup2.size(), 1u);
  EXPECT_FALSE(dup2[0].grant);
  EXPECT_EQ(rx.num_waiting(), 1u);
}

TEST(HandoffReceiverTest, ALateCommitAfterACancelIsRefusedNamingTheCancel) {
  const auto t0 = clock_type::now();
  counted_pool pool{1};
  handoff_receiver rx{"decode", 30s};
  ASSERT_TRUE(rx.offered(handoff(1), 1, t0, pool.fn())[0].grant);
  auto c = rx.cancel(1, "client went away");
  EXPECT_TRUE(c.cancel_import) << "the reserved blocks are freed";
  EXPECT_TRUE(c.answers.empty());
  auto late = rx.commit(1);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error(), engine_errc::unknown_request);
  EXPECT_NE(text(late.error()).find("cancelled: client went away"), std::string::npos) << text(late.error());
  EXPECT_FALSE(rx.cancel(1, "again").cancel_import) << "a second cancel frees nothing";
}

TEST(HandoffReceiverTest, ACancelOfAWaitingHandOffAnswersIt) {
  const auto t0 = clock_type::now();
  counted_pool pool{0};
  handoff_receiver rx{"decode", 30s};
  EXPECT_TRUE(rx.offered(handoff(1), 9, t0, pool.fn()).empty());
  auto c = rx.cancel(1, "client went away");
  EXPECT_FALSE(c.cancel_import);
  ASSERT_EQ(c.answers.size(), 1u);
  EXPECT_EQ(c.answers[0].ticket, 9u);
  ASSERT_FALSE(c.answers[0].grant);
  EXPECT_NE(text(c.answers[0].grant.error()).find("request 1 was cancelled: client went away"), std::string::npos);
  EXPECT_EQ(rx.num_waiting(), 0u);
}

TEST(HandoffReceiverTest, AGrantWhosePeerDiedMidTransferExpiresAtItsDeadline) {
  const auto t0 = clock_type::now();
  counted_pool pool{1};
  handoff_receiver rx{"decode", 10s};
  ASSERT_TRUE(rx.offered(handoff(1), 1, t0, pool.fn())[0].grant);
  EXPECT_FALSE(rx.expire(1, t0 + 9s)) << "not yet";
  EXPECT_TRUE(rx.holds(1));
  EXPECT_TRUE(rx.expire(1, t0 + 10s)) << "no commit came: the import is cancelled";
  EXPECT_FALSE(rx.holds(1));
  EXPECT_FALSE(rx.expire(1, t0 + 11s)) << "once";
  auto late = rx.commit(1);
  ASSERT_FALSE(late);
  EXPECT_NE(text(late.error()).find("no commit within the hand-off timeout"), std::string::npos) << text(late.error());
}

TEST(HandoffReceiverTest, ATimeoutRacingACommitEndsTheGrantOnlyOnce) {
  const auto t0 = clock_type::now();
  counted_pool pool{2};
  handoff_receiver rx{"decode", 10s};
  // The commit wins: the timer that fires after it does nothing.
  ASSERT_TRUE(rx.offered(handoff(1), 1, t0, pool.fn())[0].grant);
  ASSERT_TRUE(rx.commit(1));
  EXPECT_FALSE(rx.expire(1, t0 + 10s)) << "a committed import is never cancelled by the timer";
  // A timer of an earlier grant of the same id leaves a newer grant alone.
  ASSERT_TRUE(rx.offered(handoff(2), 2, t0, pool.fn())[0].grant);
  ASSERT_TRUE(rx.cancel(2, "retry").cancel_import);
  pool.free = 1;
  ASSERT_TRUE(rx.offered(handoff(2), 3, t0 + 5s, pool.fn())[0].grant);
  EXPECT_FALSE(rx.expire(2, t0 + 10s)) << "the first grant's timer";
  EXPECT_TRUE(rx.holds(2));
  EXPECT_TRUE(rx.expire(2, t0 + 15s)) << "the second grant's own timer";
}

TEST(HandoffReceiverTest, ACrashRefusesTheWaitingAndReturnsTheGrants) {
  const auto t0 = clock_type::now();
  counted_pool pool{1};
  handoff_receiver rx{"decode", 10s};
  ASSERT_TRUE(rx.offered(handoff(1), 1, t0, pool.fn())[0].grant);
  EXPECT_TRUE(rx.offered(handoff(2), 2, t0, pool.fn()).empty());
  std::vector<handoff_receiver::answer> answers;
  auto held = rx.fail_all("worker decode crashed", answers);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].grant.request_id, 1u);
  EXPECT_EQ(held[0].reply_to.actor, "sink") << "the worker tells its client";
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].ticket, 2u);
  ASSERT_FALSE(answers[0].grant);
  EXPECT_EQ(answers[0].grant.error(), engine_errc::device_error);
  EXPECT_EQ(rx.num_granted() + rx.num_waiting(), 0u);
  EXPECT_FALSE(rx.commit(1));
}

TEST(HandoffReceiverTest, CountsTheDecodesItAcceptedAsOutstandingUnits) {
  const auto t0 = clock_type::now();
  counted_pool pool{1};
  handoff_receiver rx{"decode", 10s};
  engine::model_units u;
  u.per_output_token = 2;
  u.per_request = 5;
  ASSERT_TRUE(rx.offered(handoff(1, 10), 1, t0, pool.fn())[0].grant);
  EXPECT_TRUE(rx.offered(handoff(2, 4), 2, t0, pool.fn()).empty());
  // (10 - 1) * 2 + 5 granted, (4 - 1) * 2 + 5 waiting.
  EXPECT_DOUBLE_EQ(rx.outstanding(u), 23 + 11);
  ASSERT_TRUE(rx.commit(1));
  EXPECT_DOUBLE_EQ(rx.outstanding(u), 11) << "a committed decode is the engine's now";
}

} // namespace
} // namespace tessera::actors
