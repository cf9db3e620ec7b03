#pragma once
/// @file
/// `tessera bench serve --sdk`: one load level over the native client SDK
/// (sdk/), the same requests `tessera bench serve` sends over HTTP (prompt
/// ids load_prompt(seed, index), max_tokens with ignore_eos, greedy), C in
/// flight on one client, each slot sending its next request as soon as the
/// previous one ends (closed loop). By default chunks arrive through the
/// SDK's on_chunk callback on its receive thread and one driver thread
/// submits (the SDK's asynchronous style, as the HTTP driver is one Asio
/// thread); `threads` instead gives each slot a thread blocking in
/// stream::next() (the synchronous style: a thread wake-up per chunk).
/// Arrivals are timed as the HTTP driver times SSE chunks, so the two
/// summaries compare like for like.

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
  /// One blocking thread per slot instead of callbacks.
  bool threads = false;
};

/// A connected SDK client for the levels; the error's text when it fails.
[[nodiscard]] std::shared_ptr<sdk::client> connect_sdk(const sdk_target& t, std::string& error);

/// Runs `level` over `client`; one sample per request.
[[nodiscard]] std::vector<request_sample> run_sdk_level(sdk::client& client, const sdk_target& t,
                                                        const load_level& level);

} // namespace tessera::bench
