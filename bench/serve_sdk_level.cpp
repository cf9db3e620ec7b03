#include "bench/serve_sdk_level.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
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

std::vector<request_sample> run_sdk_level(sdk::client& client, const sdk_target& t, const load_level& level) {
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
      sdk::request r;
      r.prompt_ids = load_prompt(level.seed, level.first_index + static_cast<uint64_t>(index), level.prompt_tokens);
      r.params.max_tokens = level.output_tokens;
      r.params.temperature = 0;
      r.params.ignore_eos = true;
      r.api_key = t.api_key;
      request_sample s;
      s.start_s = now_s();
      try {
        auto st = client.submit(std::move(r));
        while (auto ch = st.next()) {
          if (ch->tokens.empty() && ch->text.empty())
            continue;
          const double at = now_s();
          if (s.first_token_s < 0)
            s.first_token_s = at;
          else
            s.token_gaps_s.push_back(at - s.last_token_s);
          s.last_token_s = at;
          ++s.text_chunks;
          s.output_tokens += static_cast<int64_t>(ch->tokens.size());
        }
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

} // namespace tessera::bench
