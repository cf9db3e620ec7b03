#include "bench/serve_sdk_level.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <tessera/sdk.hpp>

namespace tessera::bench {

namespace {
using clock_type = std::chrono::steady_clock;
} // namespace

std::shared_ptr<sdk::client> connect_sdk(const sdk_target& t, std::string& error) {
  try {
    sdk::options o;
    o.cluster_secret_file = t.secret_file;
    o.timeout = std::chrono::seconds{300};
    return sdk::client::connect(t.address, o);
  } catch (const sdk::error& e) {
    error = e.what();
    return nullptr;
  }
}

namespace {

sdk::request make_request(const sdk_target& t, const load_level& level, int index) {
  sdk::request r;
  r.prompt_ids = load_prompt(level.seed, level.first_index + static_cast<uint64_t>(index), level.prompt_tokens);
  r.params.max_tokens = level.output_tokens;
  r.params.temperature = 0;
  r.params.ignore_eos = true;
  r.api_key = t.api_key;
  return r;
}

// A chunk's arrival, timed as the HTTP driver times an SSE text chunk.
void record_chunk(request_sample& s, const sdk::chunk& ch, double at) {
  if (ch.tokens.empty() && ch.text.empty())
    return;
  s.add_text_chunk(at);
  s.output_tokens += static_cast<int64_t>(ch.tokens.size());
}

// One thread per slot, each blocking in next().
std::vector<request_sample> run_threads(sdk::client& client, const sdk_target& t, const load_level& level) {
  const auto t0 = clock_type::now();
  const auto deadline = t0 + std::chrono::duration_cast<clock_type::duration>(
                               std::chrono::duration<double>(level.duration_s));
  auto now_s = [t0] { return std::chrono::duration<double>(clock_type::now() - t0).count(); };
  std::atomic<int> issued{0};
  std::mutex mu;
  std::vector<request_sample> samples;
  auto worker = [&] {
    for (;;) {
      if (level.duration_s > 0 ? clock_type::now() >= deadline : issued.load() >= level.requests)
        return;
      const int index = issued++;
      if (level.duration_s <= 0 && index >= level.requests)
        return;
      request_sample s;
      s.start_s = now_s();
      try {
        auto st = client.submit(make_request(t, level, index));
        while (auto ch = st.next())
          record_chunk(s, *ch, now_s());
      } catch (const sdk::error& e) {
        s.error = e.what();
      }
      s.end_s = now_s();
      std::lock_guard lock{mu};
      samples.push_back(std::move(s));
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < level.concurrency; ++i)
    threads.emplace_back(worker);
  for (auto& th : threads)
    th.join();
  return samples;
}

// Callbacks: chunks are timed on the SDK's receive thread; a slot whose
// request ended (its last chunk, or a failure the driver finds by polling
// stream::done()) is handed back to the one driver thread, which submits
// the slot's next request.
std::vector<request_sample> run_callbacks(sdk::client& client, const sdk_target& t, const load_level& level) {
  const auto t0 = clock_type::now();
  const auto deadline = t0 + std::chrono::duration_cast<clock_type::duration>(
                               std::chrono::duration<double>(level.duration_s));
  auto now_s = [t0] { return std::chrono::duration<double>(clock_type::now() - t0).count(); };
  struct slot {
    request_sample sample;
    std::optional<sdk::stream> stream;
    bool ended = false; // set on the receive thread under mu
  };
  const auto n = static_cast<size_t>(std::max(1, level.concurrency));
  std::vector<slot> slots(n);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> ended; // slots whose request ended, for the driver
  std::vector<request_sample> samples;
  int issued = 0;
  size_t active = 0;
  auto more = [&] {
    return level.duration_s > 0 ? clock_type::now() < deadline : issued < level.requests;
  };
  auto start = [&](size_t i) {
    slot& sl = slots[i];
    sl.sample = request_sample{};
    sl.ended = false;
    sl.sample.start_s = now_s();
    const int index = issued++;
    try {
      sl.stream = client.submit(make_request(t, level, index), [&, i](const sdk::chunk& ch) {
        const double at = now_s();
        std::lock_guard lock{mu};
        slot& s = slots[i];
        record_chunk(s.sample, ch, at);
        if (!ch.finish_reason.empty() && !s.ended) {
          s.ended = true;
          s.sample.end_s = at;
          ended.push_back(i);
          cv.notify_one();
        }
      });
      ++active;
    } catch (const sdk::error& e) {
      sl.sample.error = e.what();
      sl.sample.end_s = now_s();
      samples.push_back(std::move(sl.sample));
    }
  };
  {
    std::unique_lock lock{mu};
    for (size_t i = 0; i < n && more(); ++i) {
      lock.unlock();
      start(i);
      lock.lock();
    }
    while (active > 0) {
      cv.wait_for(lock, std::chrono::milliseconds{50}, [&] { return !ended.empty(); });
      // A failed request sends no last chunk: its stream is done() without
      // the slot having ended.
      for (size_t i = 0; i < n; ++i)
        if (slots[i].stream && !slots[i].ended && slots[i].stream->done()) {
          slots[i].ended = true;
          slots[i].sample.end_s = now_s();
          ended.push_back(i);
        }
      auto done = std::move(ended);
      ended.clear();
      for (size_t i : done) {
        slot& sl = slots[i];
        auto st = std::move(*sl.stream);
        sl.stream.reset();
        --active;
        lock.unlock();
        try {
          (void)st.wait(); // the failure, if any
        } catch (const sdk::error& e) {
          sl.sample.error = e.what();
        }
        lock.lock();
        samples.push_back(std::move(sl.sample));
        if (more()) {
          lock.unlock();
          start(i);
          lock.lock();
        }
      }
    }
  }
  return samples;
}

} // namespace

std::vector<request_sample> run_sdk_level(sdk::client& client, const sdk_target& t, const load_level& level) {
  return t.threads ? run_threads(client, t, level) : run_callbacks(client, t, level);
}

} // namespace tessera::bench
