#include "actors/router/router_errc.hpp"

namespace tessera::actors {

const char* to_string(router_errc x) {
  switch (x) {
    case router_errc::no_healthy_worker: return "no_healthy_worker";
    case router_errc::unknown_policy: return "unknown_policy";
    case router_errc::invalid_request: return "invalid_request";
    case router_errc::invalid_options: return "invalid_options";
  }
  return "unknown";
}

caf::error make_router_error(router_errc code, std::string what) {
  return caf::error{code, std::move(what)};
}

} // namespace tessera::actors
