#include "kvstore/store_events.hpp"

#include <gtest/gtest.h>

#include "tests/kvstore/kv_test_blocks.hpp"

namespace tessera::kvstore {
namespace {

using test::key_of;
using kind = store_event::kind;

TEST(EventLogTest, RecordsNothingUntilTurnedOn) {
  event_log log;
  EXPECT_FALSE(log.recording());
  log.push(kind::stored, kv_tier::host, key_of(1));
  EXPECT_TRUE(log.drain().empty());
  EXPECT_TRUE(log.set_recording(true));
  EXPECT_FALSE(log.set_recording(true)) << "already on";
  log.push(kind::stored, kv_tier::host, key_of(1));
  EXPECT_EQ(log.drain().size(), 1u);
}

TEST(EventLogTest, CoalescesRunsOfEqualKindTierAndNamespace) {
  event_log log;
  log.set_recording(true);
  log.push(kind::stored, kv_tier::host, key_of(1));
  log.push(kind::stored, kv_tier::host, key_of(2));
  log.push(kind::stored, kv_tier::disk, key_of(3));
  log.push(kind::stored, kv_tier::disk, key_of(4, 9));
  log.push(kind::removed, kv_tier::disk, key_of(4, 9));
  auto ev = log.drain();
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].hashes.size(), 2u);
  EXPECT_EQ(ev[1].tier, kv_tier::disk);
  EXPECT_EQ(ev[2].ns, 9u);
  EXPECT_EQ(ev[3].what, kind::removed);
  EXPECT_TRUE(log.drain().empty()) << "drain empties the log";
}

TEST(EventLogTest, PastTheBoundDropsAndSaysSoOnce) {
  event_log log{3};
  log.set_recording(true);
  for (uint64_t i = 0; i < 10; ++i)
    log.push(kind::stored, kv_tier::host, key_of(i));
  auto ev = log.drain();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].hashes.size(), 3u);
  EXPECT_EQ(ev[1].what, kind::lost);
  EXPECT_EQ(log.dropped(), 7u);
  log.push(kind::stored, kv_tier::host, key_of(11));
  EXPECT_EQ(log.drain().size(), 1u) << "room again after a drain";
}

TEST(EventLogTest, TurningOffDiscardsTheBacklog) {
  event_log log;
  log.set_recording(true);
  log.push(kind::stored, kv_tier::host, key_of(1));
  log.set_recording(false);
  log.set_recording(true);
  EXPECT_TRUE(log.drain().empty());
}

} // namespace
} // namespace tessera::kvstore
