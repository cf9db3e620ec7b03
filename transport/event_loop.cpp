#include "transport/event_loop.hpp"

#include "common/assert.hpp"

namespace tessera::transport {

event_loop::event_loop() {
  // thread_id_ is written before any task can observe it: run() waits on mu_.
  std::unique_lock lock{mu_};
  thread_ = std::thread{[this] { run(); }};
  thread_id_ = thread_.get_id();
}

event_loop::~event_loop() {
  stop(true);
  join();
}

bool event_loop::post(task_fn fn, task_fn on_cancel) {
  return post_at(clock::time_point::min(), std::move(fn), std::move(on_cancel));
}

bool event_loop::post_at(clock::time_point due, task_fn fn, task_fn on_cancel) {
  {
    std::lock_guard lock{mu_};
    if (stopping_)
      return false;
    tasks_.push(task{due, next_seq_++, std::move(fn), std::move(on_cancel)});
  }
  cv_.notify_one();
  return true;
}

void event_loop::stop(bool run_cancels) {
  {
    std::lock_guard lock{mu_};
    if (stopping_)
      return;
    stopping_ = true;
    run_cancels_ = run_cancels;
  }
  cv_.notify_one();
}

bool event_loop::stopped() const {
  std::lock_guard lock{mu_};
  return stopping_;
}

void event_loop::join() {
  // Only while joinable: a joined thread's id may be reused by another.
  if (!thread_.joinable())
    return;
  TESSERA_ASSERT(!in_loop(), "event_loop joined from its own thread");
  thread_.join();
}

void event_loop::run() {
  std::unique_lock lock{mu_};
  while (!stopping_) {
    if (tasks_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto due = tasks_.top().due;
    if (due > clock::now()) {
      cv_.wait_until(lock, due);
      continue;
    }
    // priority_queue::top is const; the task is popped right after.
    auto t = std::move(const_cast<task&>(tasks_.top()));
    tasks_.pop();
    lock.unlock();
    t.fn();
    t = {}; // destroy captures outside the lock
    lock.lock();
  }
  std::vector<task> rest;
  while (!tasks_.empty()) {
    rest.push_back(std::move(const_cast<task&>(tasks_.top())));
    tasks_.pop();
  }
  bool cancel = run_cancels_;
  lock.unlock();
  if (cancel)
    for (auto& t : rest)
      if (t.on_cancel)
        t.on_cancel();
}

} // namespace tessera::transport
