#include "protocol/engine_errc.hpp"

#include <caf/message.hpp>

namespace tessera::protocol {

const char* to_string(engine_errc x) {
  switch (x) {
    case engine_errc::io_error: return "io_error";
    case engine_errc::bad_config: return "bad_config";
    case engine_errc::bad_weights: return "bad_weights";
    case engine_errc::missing_tensor: return "missing_tensor";
    case engine_errc::unsupported: return "unsupported";
    case engine_errc::bad_tokenizer: return "bad_tokenizer";
    case engine_errc::bad_request: return "bad_request";
    case engine_errc::unknown_request: return "unknown_request";
    case engine_errc::out_of_blocks: return "out_of_blocks";
    case engine_errc::no_free_blocks: return "no_free_blocks";
    case engine_errc::kv_mismatch: return "kv_mismatch";
    case engine_errc::device_error: return "device_error";
    case engine_errc::overloaded: return "overloaded";
    case engine_errc::bad_logits: return "bad_logits";
  }
  return "unknown";
}

caf::error make_engine_error(engine_errc code, std::string what) {
  return caf::error{code, std::move(what)};
}

} // namespace tessera::protocol
