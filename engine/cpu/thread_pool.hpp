#pragma once
/// @file
/// A fork-join pool for the CPU backend. The calling thread is worker 0;
/// n-1 more threads spin briefly then sleep between jobs, so the many small
/// parallel regions of a decode step cost microseconds, not a wake-up each.

#include <cstdint>
#include <functional>
#include <memory>

namespace tessera::engine::cpu {

/// A fixed set of worker threads running one job at a time.
/// Not thread-safe: one thread submits jobs (the engine thread).
class thread_pool {
public:
  /// Starts `n_threads - 1` workers (the caller is the n-th).
  /// `n_threads` <= 0 means one per hardware core. Default: all cores.
  explicit thread_pool(int n_threads = 0);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// Number of threads that run jobs, caller included.
  [[nodiscard]] int size() const;

  /// Runs fn(thread_index) once on each of the size() threads and returns
  /// when all are done. thread_index is 0..size()-1; 0 is the caller.
  void run(const std::function<void(int thread_index)>& fn);

  /// Splits [0, n) into size() contiguous ranges, in order (thread t gets
  /// the t-th range; ranges depend only on n and size()), and runs
  /// fn(begin, end) for each non-empty one.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

  /// Runs fn(chunk) once for each chunk in [0, n_chunks) and returns when all
  /// are done. Threads take chunks in increasing order as they become free,
  /// so which thread runs a chunk is unspecified; a thread that is
  /// descheduled or asleep when the job starts leaves its share to the
  /// others instead of holding up the caller (on a shared host this matters
  /// more than the cost of handing out chunks). The caller runs chunks too.
  void run_chunks(int64_t n_chunks, const std::function<void(int64_t chunk)>& fn);
  /// As above, with the index (0..size()-1, 0 the caller) of the thread
  /// running each chunk, for per-thread scratch memory: a thread runs one
  /// chunk at a time.
  void run_chunks(int64_t n_chunks, const std::function<void(int64_t chunk, int thread_index)>& fn);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace tessera::engine::cpu
