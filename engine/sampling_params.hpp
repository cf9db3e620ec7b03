#pragma once
/// @file
/// Per-request generation settings, defined in the protocol library (the
/// client, the wire and the engine share them):
/// protocol/sampling_params.hpp.

#include "protocol/sampling_params.hpp"

namespace tessera::engine {

using protocol::sampling_params;
using protocol::speculative_params;
using protocol::structured_output_params;

} // namespace tessera::engine
