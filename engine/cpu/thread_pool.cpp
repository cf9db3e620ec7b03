#include "engine/cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera::engine::cpu {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Wait for work by spinning this many pause loops, then this many yields,
// before sleeping. A decode step issues ~100 parallel regions a few tens of
// microseconds apart; spinning through those gaps avoids a futex wake-up per
// region. The yield phase keeps the pool live when it has more threads than
// free cores (a shared host): a spinning thread then hands its core to the
// one the job is waiting for instead of burning its whole time slice.
constexpr int spin_iterations = 4000;
constexpr int yield_iterations = 2000;

} // namespace

struct thread_pool::impl {
  int n_threads = 1;
  std::vector<std::thread> workers;
  const std::function<void(int)>* job = nullptr;
  // Generation counter: a worker runs the job once per increment.
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> sleepers{0};

  void worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t g = generation.load(std::memory_order_acquire);
      for (int i = 0; g == seen && i < spin_iterations + yield_iterations; ++i) {
        if (i < spin_iterations)
          cpu_relax();
        else
          std::this_thread::yield();
        g = generation.load(std::memory_order_acquire);
      }
      if (g == seen) {
        std::unique_lock lock{mu};
        sleepers.fetch_add(1, std::memory_order_acq_rel);
        cv.wait(lock, [&] {
          return generation.load(std::memory_order_acquire) != seen ||
                 stop.load(std::memory_order_acquire);
        });
        sleepers.fetch_sub(1, std::memory_order_acq_rel);
        g = generation.load(std::memory_order_acquire);
      }
      if (stop.load(std::memory_order_acquire))
        return;
      seen = g;
      (*job)(index);
      pending.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
};

thread_pool::thread_pool(int n_threads) : impl_(std::make_unique<impl>()) {
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  impl_->n_threads = n_threads;
  for (int i = 1; i < n_threads; ++i)
    impl_->workers.emplace_back([this, i] { impl_->worker_loop(i); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard lock{impl_->mu};
    impl_->stop.store(true, std::memory_order_release);
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->workers)
    t.join();
}

int thread_pool::size() const { return impl_->n_threads; }

void thread_pool::run(const std::function<void(int)>& fn) {
  if (impl_->n_threads == 1) {
    fn(0);
    return;
  }
  impl_->job = &fn;
  impl_->pending.store(impl_->n_threads - 1, std::memory_order_release);
  {
    // Publishing under the mutex pairs with the sleepers' predicate check,
    // so a worker going to sleep cannot miss this generation.
    std::lock_guard lock{impl_->mu};
    impl_->generation.fetch_add(1, std::memory_order_acq_rel);
  }
  if (impl_->sleepers.load(std::memory_order_acquire) > 0)
    impl_->cv.notify_all();
  fn(0);
  // Spin for the stragglers, then yield: with more threads than free cores
  // (a shared host, or a pool larger than the machine) the worker we wait
  // for may need this core to finish.
  for (int i = 0; impl_->pending.load(std::memory_order_acquire) != 0; ++i) {
    if (i < spin_iterations)
      cpu_relax();
    else
      std::this_thread::yield();
  }
  impl_->job = nullptr;
}

void thread_pool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0)
    return;
  const int64_t t = impl_->n_threads;
  if (t == 1 || n == 1) {
    fn(0, n);
    return;
  }
  run([&](int index) {
    int64_t begin = n * index / t;
    int64_t end = n * (index + 1) / t;
    if (begin < end)
      fn(begin, end);
  });
}

} // namespace tessera::engine::cpu
