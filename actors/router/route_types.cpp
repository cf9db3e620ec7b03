#include "actors/router/route_types.hpp"

namespace tessera::actors {

const char* to_string(worker_role r) {
  switch (r) {
    case worker_role::prefill: return "prefill";
    case worker_role::decode: return "decode";
    case worker_role::both: return "both";
  }
  return "unknown";
}

const char* to_string(load_measure m) {
  return m == load_measure::units ? "units" : "blocks";
}

} // namespace tessera::actors
