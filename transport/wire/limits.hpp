#pragma once
/// @file
/// Bounds on frames and on every list and string in a wire message. A frame
/// or message outside them is rejected (decode) or refused (encode).

#include <cstddef>
#include <cstdint>

namespace tessera::transport::wire {

/// Size bounds; the defaults suit a server whose longest context is 1M
/// tokens. Sampling-parameter bounds are protocol::sampling_params::validate's
/// (16 stop strings of <= 256 bytes, 64 stop token ids, logprobs <= 20).
struct wire_limits {
  /// Largest frame body in bytes. Default: 64 MiB.
  uint32_t max_body_bytes = 64u << 20;
  /// Most tokens in a prompt or a KV export. Default: 1 << 20.
  size_t max_tokens = size_t{1} << 20;
  /// Most tokens in one token chunk. Default: 65536.
  size_t max_chunk_tokens = 65536;
  /// Most bytes of text in a token chunk or an error message.
  /// Default: 1 MiB.
  size_t max_text_bytes = size_t{1} << 20;
  /// Most bytes of a name-like string: node id, address, join token, cache
  /// salt, error category, stop reason. Default: 1024.
  size_t max_name_bytes = 1024;
  /// Most blocks in one KV transfer batch. Default: 65536.
  size_t max_blocks_per_batch = 65536;
  /// Most block hashes in one KV event. Default: 65536.
  size_t max_event_hashes = 65536;
  /// Most request ids in one request_status or its reply. Default: 4096.
  size_t max_status_ids = 4096;
  /// Most workers in one worker_views. Default: 4096.
  size_t max_worker_views = 4096;
  /// Capnp nesting limit (our schemas nest at most 4 deep). Default: 16.
  int nesting_limit = 16;
};

} // namespace tessera::transport::wire
