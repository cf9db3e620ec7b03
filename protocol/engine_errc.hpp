#pragma once
/// @file
/// The engine's error codes. Every error the engine library returns is a
/// caf::error with one of these codes and a message naming what was wrong.
/// They are protocol vocabulary: they cross the wire in wire_error
/// (category "engine") and reach clients, whose SDK and HTTP API name them;
/// engine/engine_errc.hpp makes them engine::engine_errc.

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace tessera::protocol {

/// Error codes of the engine library (category "engine").
enum class engine_errc : uint8_t {
  /// A file could not be opened, read, mapped or written.
  io_error = 1,
  /// config.json / generation_config.json / tokenizer_config.json is
  /// malformed, misses a field or has an out-of-range value.
  bad_config,
  /// A safetensors file is malformed: truncated, lying header, overlap.
  bad_weights,
  /// A tensor the architecture needs is missing or has the wrong shape.
  missing_tensor,
  /// A dtype or architecture this engine does not support.
  unsupported,
  /// tokenizer.json / tokenizer.model is malformed or unsupported.
  bad_tokenizer,
  /// A request is invalid (empty prompt, too long, bad sampling params).
  bad_request,
  /// The request id is unknown or already used.
  unknown_request,
  /// The KV cache has no room for the request, even when empty.
  out_of_blocks,
  /// An imported KV export does not match this engine's layout or model.
  kv_mismatch,
  /// A GPU runtime call failed on a present device (out of memory, a
  /// failed launch, a lost device); the message names the call.
  device_error,
  /// Too many requests are waiting; retry later (HTTP 429).
  overloaded,
  /// The KV cache would hold the request, but too few blocks are free now
  /// (others hold them); retry when requests finish.
  no_free_blocks,
  /// The model computed logits for a request that hold NaN or +inf or no
  /// finite value: its KV cache or the weights are corrupt. That request
  /// fails; the engine goes on serving the others.
  bad_logits,
};

/// Returns the name of `x`, e.g. "bad_config".
const char* to_string(engine_errc x);

/// Makes a caf::error of category "engine" carrying `what`.
caf::error make_engine_error(engine_errc code, std::string what);

} // namespace tessera::protocol

CAF_ERROR_CODE_ENUM(tessera::protocol::engine_errc, "engine")
