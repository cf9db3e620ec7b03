// One-shot completion with the native SDK: connect, complete, print.
//
//   sdk_complete HOST:PORT SECRET_FILE "prompt text"

#include <iostream>

#include <tessera/sdk.hpp>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: sdk_complete HOST:PORT SECRET_FILE PROMPT\n";
    return 2;
  }
  try {
    auto client = tessera::sdk::client::connect(argv[1], {.cluster_secret_file = argv[2]});
    tessera::sdk::request r;
    r.prompt = argv[3];
    r.params.max_tokens = 32;
    r.params.temperature = 0; // greedy
    auto result = client->complete(r).get();
    std::cout << r.prompt << result.text << "\n[" << result.token_ids.size() << " tokens, "
              << result.finish_reason << "]\n";
  } catch (const tessera::sdk::error& e) {
    std::cerr << "error " << e.http_status() << ": " << e.what() << "\n";
    return 1;
  }
}
