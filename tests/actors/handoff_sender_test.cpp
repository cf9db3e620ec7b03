// The prefill side of a KV hand-off as a plain state machine
// (actors/worker/handoff_sender.hpp): every step's success and failure,
// cancels at each step, duplicated and late answers, without an actor
// system or an engine.
#include "actors/worker/handoff_sender.hpp"

#include <gtest/gtest.h>

namespace tessera::actors {
namespace {

namespace wire = transport::wire;
using step = handoff_sender::step;

const wire::actor_address decode{"d", "decode"};
const wire::actor_address client{"f", "sink"};

/// Whether `fx` does nothing at all.
bool none(const handoff_sender::effects& fx) {
  return !fx.put && !fx.release && !fx.commit && fx.cancel_peer.empty() && fx.fail_client.empty();
}

TEST(HandoffSenderTest, AGrantPutsThePutsReleaseAndCommitAndTheCommitEndsIt) {
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  EXPECT_EQ(s.at(1), step::granting);
  auto fx = s.granted(1);
  EXPECT_TRUE(fx.put);
  EXPECT_FALSE(fx.release) << "the puts read the blocks";
  EXPECT_EQ(fx.decode_at.actor, "decode");
  EXPECT_EQ(s.at(1), step::putting);
  fx = s.put_done(1);
  EXPECT_TRUE(fx.release);
  EXPECT_TRUE(fx.commit);
  EXPECT_FALSE(fx.put);
  EXPECT_TRUE(fx.cancel_peer.empty());
  EXPECT_EQ(fx.id, 1u);
  EXPECT_EQ(s.at(1), step::committing);
  fx = s.committed(1);
  EXPECT_TRUE(none(fx)) << "D streams the rest; the blocks were released already";
  EXPECT_FALSE(s.holds(1));
}

TEST(HandoffSenderTest, AStartOfARequestHandingOffAlreadyIsRefused) {
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  EXPECT_FALSE(s.started(1, {"x", "y"}, client));
  EXPECT_EQ(s.granted(1).decode_at.actor, "decode") << "the first stands";
}

TEST(HandoffSenderTest, AFailureAtAnyStepFailsTheClientCancelsAtDecodeAndReleasesOnce) {
  for (auto at : {step::granting, step::putting, step::committing}) {
    handoff_sender s;
    ASSERT_TRUE(s.started(7, decode, client));
    if (at != step::granting) {
      ASSERT_TRUE(s.granted(7).put);
    }
    if (at == step::committing) {
      ASSERT_TRUE(s.put_done(7).commit);
    }
    auto fx = s.failed(7, "request timed out");
    EXPECT_EQ(fx.release, at != step::committing) << "released at most once (step " << int(at) << ")";
    EXPECT_EQ(fx.fail_client, "hand-off to decode on node 'd' failed: request timed out");
    EXPECT_EQ(fx.reply_to.actor, "sink");
    EXPECT_EQ(fx.cancel_peer, "the hand-off failed");
    EXPECT_FALSE(fx.commit);
    EXPECT_FALSE(s.holds(7));
  }
}

TEST(HandoffSenderTest, ACancelWhileAskingReleasesAtOnceAndTheGrantOnlyCancelsAtDecode) {
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  auto fx = s.cancel(1, "client went away");
  EXPECT_TRUE(fx.release) << "nothing reads the blocks yet";
  EXPECT_TRUE(fx.cancel_peer.empty()) << "D has nothing granted yet to cancel; the grant will tell";
  EXPECT_TRUE(fx.fail_client.empty());
  fx = s.granted(1);
  EXPECT_FALSE(fx.put);
  EXPECT_FALSE(fx.release) << "released already";
  EXPECT_EQ(fx.cancel_peer, "client went away") << "D frees the grant";
  EXPECT_FALSE(s.holds(1));
}

TEST(HandoffSenderTest, ACancelWhileAskingThenARefusedGrantCancelsAtDecodeAndTellsNoClient) {
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  ASSERT_TRUE(s.cancel(1, "client went away").release);
  auto fx = s.failed(1, "no free blocks");
  EXPECT_FALSE(fx.release);
  EXPECT_TRUE(fx.fail_client.empty()) << "the client went away";
  EXPECT_EQ(fx.cancel_peer, "client went away") << "D may still hold it waiting";
}

TEST(HandoffSenderTest, ACancelWhilePuttingLetsThePutsFinishThenReleasesAndNeverCommits) {
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  ASSERT_TRUE(s.granted(1).put);
  auto fx = s.cancel(1, "client went away");
  EXPECT_TRUE(none(fx)) << "the puts still read the blocks";
  fx = s.put_done(1);
  EXPECT_TRUE(fx.release);
  EXPECT_FALSE(fx.commit) << "a late commit after a cancel is never sent";
  EXPECT_EQ(fx.cancel_peer, "client went away");
  EXPECT_FALSE(s.holds(1));
}

TEST(HandoffSenderTest, ACancelWhileCommittingCancelsAtDecodeOnce) {
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  ASSERT_TRUE(s.granted(1).put);
  ASSERT_TRUE(s.put_done(1).commit);
  auto fx = s.cancel(1, "client went away");
  EXPECT_FALSE(fx.release);
  EXPECT_EQ(fx.cancel_peer, "client went away") << "the commit may have landed: D aborts it";
  EXPECT_TRUE(none(s.cancel(1, "again"))) << "a second cancel does nothing";
  EXPECT_TRUE(none(s.committed(1))) << "D was told already";
  EXPECT_FALSE(s.holds(1));
}

TEST(HandoffSenderTest, ACancelWhileCommittingThenACommitTimeoutTellsNobodyTwice) {
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  ASSERT_TRUE(s.granted(1).put);
  ASSERT_TRUE(s.put_done(1).commit);
  ASSERT_FALSE(s.cancel(1, "client went away").cancel_peer.empty());
  EXPECT_TRUE(none(s.failed(1, "request timed out")));
}

TEST(HandoffSenderTest, DuplicatedGrantsAndPutCompletionsDoNothing) {
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  ASSERT_TRUE(s.granted(1).put);
  EXPECT_TRUE(none(s.granted(1))) << "no second put";
  EXPECT_TRUE(none(s.put_done(2))) << "unknown request";
  ASSERT_TRUE(s.put_done(1).commit);
  EXPECT_TRUE(none(s.put_done(1))) << "no second release or commit";
  EXPECT_TRUE(none(s.granted(1)));
  EXPECT_TRUE(none(s.committed(3)));
}

TEST(HandoffSenderTest, ACommitAnsweredAfterItTimedOutChangesNothing) {
  // The commit's timeout races D's answer: the timeout came first, so the
  // client heard of the failure and D was cancelled; the late answer is
  // ignored.
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  ASSERT_TRUE(s.granted(1).put);
  ASSERT_TRUE(s.put_done(1).commit);
  auto fx = s.failed(1, "request timed out");
  EXPECT_FALSE(fx.fail_client.empty());
  EXPECT_EQ(fx.cancel_peer, "the hand-off failed");
  EXPECT_TRUE(none(s.committed(1)));
  EXPECT_TRUE(none(s.failed(1, "again")));
}

TEST(HandoffSenderTest, ACrashFailsEveryHandOffAndReleasesNothing) {
  handoff_sender s;
  ASSERT_TRUE(s.started(1, decode, client));
  ASSERT_TRUE(s.started(2, decode, client));
  ASSERT_TRUE(s.granted(2).put);
  ASSERT_TRUE(s.started(3, decode, client));
  (void) s.cancel(3, "client went away");
  auto all = s.fail_all("worker prefill crashed");
  ASSERT_EQ(all.size(), 3u);
  for (const auto& fx : all) {
    EXPECT_FALSE(fx.release) << "the engine is gone";
    EXPECT_EQ(fx.cancel_peer, "worker prefill crashed");
    EXPECT_EQ(fx.fail_client.empty(), fx.id == 3) << "request " << fx.id;
  }
  EXPECT_EQ(s.size(), 0u);
}

} // namespace
} // namespace tessera::actors
