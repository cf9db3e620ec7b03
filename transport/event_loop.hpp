#pragma once
/// @file
/// event_loop: one thread running posted tasks one at a time, in order of
/// due time then posting order. The progress context of the in-process
/// transport backends (loopback/, faults/): every handler callback and
/// completion of such a transport runs here, so callbacks never overlap.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace tessera::transport {

/// A single-threaded task queue with optional due times. Thread-safe: post
/// and stop may be called from any thread, the loop's own included.
class event_loop {
public:
  using clock = std::chrono::steady_clock;
  using task_fn = std::function<void()>;

  /// Starts the thread.
  event_loop();

  /// stop(true) then join(). Must not run on the loop's own thread.
  ~event_loop();

  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;

  /// Runs `fn` on the loop thread as soon as the tasks posted before it
  /// ran. If the loop stops first, `on_cancel` (may be empty) runs instead
  /// (see stop). Returns false, running neither, when already stopped.
  bool post(task_fn fn, task_fn on_cancel = {});

  /// As post, but not before `due` (a timer). Tasks with equal due times run
  /// in posting order.
  bool post_at(clock::time_point due, task_fn fn, task_fn on_cancel = {});

  /// Stops the loop: the task running now finishes, no later one runs. With
  /// `run_cancels`, each queued task's on_cancel then runs on the loop
  /// thread (in queue order); otherwise they are discarded. Idempotent.
  void stop(bool run_cancels);

  /// Waits for the thread to finish; call after stop. Not from the loop.
  void join();

  /// True on the loop's own thread.
  [[nodiscard]] bool in_loop() const { return std::this_thread::get_id() == thread_id_; }

  /// True once stop was called.
  [[nodiscard]] bool stopped() const;

private:
  struct task {
    clock::time_point due;
    uint64_t seq = 0;
    task_fn fn;
    task_fn on_cancel;
  };
  struct later {
    bool operator()(const task& a, const task& b) const {
      return a.due != b.due ? a.due > b.due : a.seq > b.seq;
    }
  };

  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<task, std::vector<task>, later> tasks_; // guarded by mu_
  uint64_t next_seq_ = 0;                                     // guarded by mu_
  bool stopping_ = false;                                     // guarded by mu_
  bool run_cancels_ = false;                                  // guarded by mu_
  std::thread thread_;
  std::thread::id thread_id_;
};

} // namespace tessera::transport
