#pragma once
/// @file
/// `tessera bench serve --sdk`: one load level over the native client SDK
/// (sdk/), the same requests `tessera bench serve` sends over HTTP (prompt
/// ids load_prompt(seed, index), max_tokens with ignore_eos, greedy): C
/// threads share one client, each sending its next request as soon as the
/// previous one ends (closed loop). Arrivals are timed as the HTTP driver
/// times SSE chunks, so the two summaries compare like for like.

#include <memory>
#include <string>
#include <vector>

#include "bench/engine_load.hpp"
#include "bench/load_stats.hpp"

namespace tessera::sdk {
class client;
}

namespace tessera::bench {

/// Where the SDK connects.
struct sdk_target {
  /// The frontend node's cluster address, "host:port".
  std::string address;
  /// Its cluster secret file ("" for an --insecure cluster).
  std::string secret_file;
  /// The tenant's API key when the cluster has keys.
  std::string api_key;
};

/// A connected SDK client for the levels; the error's text when it fails.
[[nodiscard]] std::shared_ptr<sdk::client> connect_sdk(const sdk_target& t, std::string& error);

/// Runs `level` over `client`; one sample per request.
[[nodiscard]] std::vector<request_sample> run_sdk_level(sdk::client& client, const sdk_target& t,
                                                        const load_level& level);

} // namespace tessera::bench
