#pragma once
/// @file
/// Refusing weights that hold NaN or infinity. A model file with such a
/// value loads and runs, but every request through that weight computes NaN
/// logits; checked once at load, the error names the tensor and element
/// instead.

#include <cstddef>
#include <filesystem>
#include <optional>

#include <caf/error.hpp>

#include "engine/dtype.hpp"
#include "engine/safetensors.hpp"

namespace tessera::engine {

/// An element that is not a finite number.
struct non_finite_element {
  /// Row-major index into the tensor, from 0.
  size_t index = 0;
  /// NaN; else an infinity.
  bool nan = false;
  /// For an infinity: negative.
  bool negative = false;
};

/// The first element of the `numel` elements of `type` at `data` that is
/// NaN or infinite, or nullopt when all are finite. `data` may have any
/// alignment. One pass over the bytes (vectorised integer tests of the
/// exponent field), plus one re-scan of a 64 KiB chunk when it finds
/// something: memory bandwidth bound (about 20 GB/s on one core over
/// resident pages; a fresh mapping pays its page faults here instead of in
/// the first forward pass).
[[nodiscard]] std::optional<non_finite_element> find_non_finite(const std::byte* data, size_t numel,
                                                                dtype type);

/// Checks that tensor `t` holds only finite values. Error (bad_weights):
/// "<file>: tensor '<name>' contains NaN at element N (index [i, j])", or
/// "+inf" / "-inf" in place of NaN; `file` is the file the tensor is in.
[[nodiscard]] caf::error check_finite(const tensor_view& t, const std::filesystem::path& file);

} // namespace tessera::engine
