// A concurrent load generator with the native SDK: C threads share one
// client and send N requests in all; prints requests/s, tokens/s and the
// mean time to first token.
//
//   sdk_load HOST:PORT SECRET_FILE [C=16] [N=64] [MAX_TOKENS=32]

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include <tessera/sdk.hpp>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: sdk_load HOST:PORT SECRET_FILE [CONCURRENCY] [REQUESTS] [MAX_TOKENS]\n";
    return 2;
  }
  const int c = argc > 3 ? std::atoi(argv[3]) : 16;
  const int n = argc > 4 ? std::atoi(argv[4]) : 64;
  const int max_tokens = argc > 5 ? std::atoi(argv[5]) : 32;
  using clock = std::chrono::steady_clock;
  try {
    auto client = tessera::sdk::client::connect(argv[1], {.cluster_secret_file = argv[2]});
    std::atomic<int> next{0}, failed{0};
    std::atomic<long> tokens{0}, ttft_us{0};
    const auto start = clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < c; ++t)
      threads.emplace_back([&] {
        for (int i = next++; i < n; i = next++) {
          tessera::sdk::request r;
          r.prompt = "Request " + std::to_string(i) + ": tell me a story about the sea.";
          r.params.max_tokens = max_tokens;
          r.params.ignore_eos = true;
          const auto t0 = clock::now();
          try {
            auto s = client->submit(r);
            bool first = true;
            while (auto ch = s.next()) {
              if (first && !ch->tokens.empty()) {
                ttft_us += std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - t0).count();
                first = false;
              }
              tokens += static_cast<long>(ch->tokens.size());
            }
          } catch (const tessera::sdk::error& e) {
            ++failed;
            std::cerr << "request " << i << ": " << e.what() << "\n";
          }
        }
      });
    for (auto& t : threads)
      t.join();
    const double s = std::chrono::duration<double>(clock::now() - start).count();
    const int ok = n - failed;
    std::cout << "requests " << ok << " ok, " << failed << " failed in " << s << " s: " << ok / s << " req/s, "
              << tokens / s << " tokens/s, mean TTFT " << (ok ? ttft_us / ok / 1000.0 : 0) << " ms\n";
    return failed == 0 ? 0 : 1;
  } catch (const tessera::sdk::error& e) {
    std::cerr << "error " << e.http_status() << ": " << e.what() << "\n";
    return 1;
  }
}
