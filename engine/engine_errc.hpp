#pragma once
/// @file
/// The engine's error codes, defined in the protocol library (they cross
/// the wire and reach clients): protocol/engine_errc.hpp.

#include "protocol/engine_errc.hpp"

namespace tessera::engine {

using protocol::engine_errc;
using protocol::make_engine_error;
using protocol::to_string;

} // namespace tessera::engine
