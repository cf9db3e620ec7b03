#pragma once
/// @file
/// Helpers shared by the trace replay tests.

#include <cstdint>
#include <utility>
#include <vector>

#include "bench/mooncake_trace.hpp"

namespace tessera::bench::test {

/// A trace request of `input` tokens with `ids` (one output token).
inline trace_request req(int64_t input, std::vector<int64_t> ids) {
  trace_request r;
  r.input_length = input;
  r.output_length = 1;
  r.hash_ids = std::move(ids);
  return r;
}

} // namespace tessera::bench::test
