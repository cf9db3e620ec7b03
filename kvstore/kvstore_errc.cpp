#include "kvstore/kvstore_errc.hpp"

#include <caf/message.hpp>

namespace tessera::kvstore {

const char* to_string(kvstore_errc x) {
  switch (x) {
    case kvstore_errc::open_failed: return "open_failed";
    case kvstore_errc::bad_config: return "bad_config";
    case kvstore_errc::bad_block: return "bad_block";
    case kvstore_errc::too_large: return "too_large";
    case kvstore_errc::io_error: return "io_error";
  }
  return "unknown";
}

caf::error make_kvstore_error(kvstore_errc code, std::string what) {
  return caf::error{code, std::move(what)};
}

} // namespace tessera::kvstore
