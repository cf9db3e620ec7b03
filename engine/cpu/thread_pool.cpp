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

// Two kinds of job share one generation counter; its lowest bit says which,
// so a worker learns the kind without reading fields the caller may already
// be rewriting for the next job.
//  - run(): every worker must take part; the caller waits for all of them.
//  - run_chunks(): workers take chunks from a shared counter. A worker that
//    comes late (descheduled, asleep) may find the job over and skip it: it
//    joins through `gate`, and the caller waits only for workers that joined.
//
// gate layout: [63:32] low 32 bits of the generation it admits,
//              [31] closed, [30:0] workers inside the job.
constexpr uint64_t gate_closed = uint64_t{1} << 31;
constexpr uint64_t gate_count = gate_closed - 1;

struct thread_pool::impl {
  int n_threads = 1;
  std::vector<std::thread> workers;
  const std::function<void(int)>* job = nullptr;
  // Chunk jobs: fn(c, thread) for c in [0, n_chunks), c handed out by
  // next_chunk.
  const std::function<void(int64_t, int)>* chunk_job = nullptr;
  int64_t n_chunks = 0;
  std::atomic<int64_t> next_chunk{0};
  std::atomic<uint64_t> gate{gate_closed};
  // Generation counter: a worker runs the job once per increment. Steps by
  // 2; bit 0 set means a chunk job.
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> sleepers{0};

  void run_chunks_here(int index) {
    for (int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed); c < n_chunks;
         c = next_chunk.fetch_add(1, std::memory_order_relaxed))
      (*chunk_job)(c, index);
  }

  // Joins chunk job `g` if it is still open, runs chunks, leaves.
  void join_chunks(uint64_t g, int index) {
    const uint64_t epoch = (g & 0xffffffffu) << 32;
    uint64_t v = gate.load(std::memory_order_acquire);
    while ((v & ~gate_count) == epoch) { // admits this generation, not closed
      if (gate.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) {
        run_chunks_here(index);
        gate.fetch_sub(1, std::memory_order_acq_rel);
        return;
      }
    }
  }

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
      if (g & 1) {
        join_chunks(g, index);
      } else {
        (*job)(index);
        pending.fetch_sub(1, std::memory_order_acq_rel);
      }
    }
  }

  // Publishes the next generation of the given kind and wakes sleepers.
  uint64_t publish(bool chunks) {
    const uint64_t next = (generation.load(std::memory_order_relaxed) | 1) + 1 + (chunks ? 1 : 0);
    if (chunks)
      gate.store((next & 0xffffffffu) << 32, std::memory_order_release);
    {
      // Publishing under the mutex pairs with the sleepers' predicate check,
      // so a worker going to sleep cannot miss this generation.
      std::lock_guard lock{mu};
      generation.store(next, std::memory_order_release);
    }
    if (sleepers.load(std::memory_order_acquire) > 0)
      cv.notify_all();
    return next;
  }

  // Spin for `done`, then yield: with more threads than free cores (a shared
  // host, or a pool larger than the machine) the thread we wait for may need
  // this core to finish.
  template <class Done>
  static void wait_until(Done done) {
    for (int i = 0; !done(); ++i) {
      if (i < spin_iterations)
        cpu_relax();
      else
        std::this_thread::yield();
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
  impl_->publish(false);
  fn(0);
  impl_->wait_until([&] { return impl_->pending.load(std::memory_order_acquire) == 0; });
  impl_->job = nullptr;
}

void thread_pool::run_chunks(int64_t n_chunks, const std::function<void(int64_t chunk)>& fn) {
  run_chunks(n_chunks, std::function<void(int64_t, int)>{[&fn](int64_t c, int) { fn(c); }});
}

void thread_pool::run_chunks(int64_t n_chunks,
                             const std::function<void(int64_t chunk, int thread_index)>& fn) {
  if (n_chunks <= 0)
    return;
  if (impl_->n_threads == 1 || n_chunks == 1) {
    for (int64_t c = 0; c < n_chunks; ++c)
      fn(c, 0);
    return;
  }
  impl_->chunk_job = &fn;
  impl_->n_chunks = n_chunks;
  impl_->next_chunk.store(0, std::memory_order_relaxed);
  impl_->publish(true);
  impl_->run_chunks_here(0);
  // No new worker may join now; wait for those inside to finish their chunk.
  impl_->gate.fetch_or(gate_closed, std::memory_order_acq_rel);
  impl_->wait_until(
      [&] { return (impl_->gate.load(std::memory_order_acquire) & gate_count) == 0; });
  impl_->chunk_job = nullptr;
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
