#include "protocol/request.hpp"

namespace tessera::protocol {

std::string_view to_string(finish_reason r) {
  switch (r) {
    case finish_reason::none: return "";
    case finish_reason::stop: return "stop";
    case finish_reason::length: return "length";
    case finish_reason::abort: return "abort";
  }
  return "";
}

} // namespace tessera::protocol
