// event_loop: tasks run one at a time in due-time then posting order;
// stop runs (or discards) the cancel handlers of what was still queued.

#include "transport/event_loop.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

namespace tessera::transport {
namespace {

using namespace std::chrono_literals;

TEST(EventLoopTest, RunsTasksInDueTimeThenPostingOrder) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> order;
  auto record = [&](int v) {
    return [&, v] {
      std::lock_guard lock{mu};
      order.push_back(v);
      cv.notify_all();
    };
  };
  event_loop loop;
  std::unique_lock gate_lock{mu};
  // The first task blocks the loop until everything else is queued.
  bool open = false;
  ASSERT_TRUE(loop.post([&] {
    std::unique_lock lock{mu};
    cv.wait(lock, [&] { return open; });
  }));
  auto soon = event_loop::clock::now() + 20ms;
  ASSERT_TRUE(loop.post_at(soon, record(3)));
  ASSERT_TRUE(loop.post(record(1)));
  ASSERT_TRUE(loop.post_at(soon, record(4)));
  ASSERT_TRUE(loop.post(record(2)));
  open = true;
  cv.notify_all();
  ASSERT_TRUE(cv.wait_for(gate_lock, 60s, [&] { return order.size() == 4; }));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_GE(event_loop::clock::now(), soon);
}

TEST(EventLoopTest, StopRunsCancelsOfQueuedTasksOrDiscardsThem) {
  for (bool run_cancels : {true, false}) {
    int ran = 0, cancelled = 0;
    {
      event_loop loop;
      ASSERT_TRUE(loop.post_at(event_loop::clock::now() + 1h, [&] { ++ran; },
                               [&] { ++cancelled; }));
      loop.stop(run_cancels);
      EXPECT_FALSE(loop.post([&] { ++ran; }));
      EXPECT_TRUE(loop.stopped());
      loop.join();
    }
    EXPECT_EQ(ran, 0);
    EXPECT_EQ(cancelled, run_cancels ? 1 : 0);
  }
}

TEST(EventLoopTest, ATaskMayStopItsOwnLoop) {
  event_loop loop;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  ASSERT_TRUE(loop.post([&] {
    loop.stop(true);
    std::lock_guard lock{mu};
    done = true;
    cv.notify_all();
  }));
  std::unique_lock lock{mu};
  ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return done; }));
  lock.unlock();
  loop.join();
  EXPECT_FALSE(loop.post([] {}));
}

} // namespace
} // namespace tessera::transport
