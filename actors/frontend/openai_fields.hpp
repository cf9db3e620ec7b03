// Internal to tessera_frontend_api (not installed, not for other
// libraries): the field reader that parse_request (openai_request.cpp)
// and the chat messages' parser (openai_messages.cpp) share.
#pragma once

#include "actors/frontend/openai_request.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/utf8.hpp"

namespace tessera::actors::frontend::openai_detail {

using json = nlohmann::json;

inline constexpr int64_t int32_max = std::numeric_limits<int32_t>::max();
inline constexpr int64_t int64_max = std::numeric_limits<int64_t>::max();

/// Shows a value the client sent, short enough for a message: numbers and
/// booleans as written, strings quoted (cut at 48 bytes), containers by
/// kind. Never throws (dump's replace handler; the body was valid UTF-8).
[[nodiscard]] std::string describe(const json& j);

/// `x` as printf's %g writes it.
[[nodiscard]] std::string show(double x);

/// The JSON text of each non-integer number of a body (and of integers
/// too large for 64 bits), by the name the field_reader gives its field
/// ("top_p", "stop_token_ids[3]", "messages[0].x"): errors quote a number
/// as the client wrote it, not as it reads back from a double (1e-300 is
/// not "0", 1e400 not "inf").
using raw_numbers = std::map<std::string, std::string, std::less<>>;

/// Reads the fields of one request body, remembering the first error.
/// Every access checks the type first, so nothing here throws.
class field_reader {
public:
  field_reader(const json& obj, const api_limits& limits, const raw_numbers* raw = nullptr)
      : obj_(obj), limits_(limits), raw_(raw) {}

  /// The first error met, if any.
  std::optional<api_error> error;

  /// True once an error is recorded.
  [[nodiscard]] bool failed() const { return error.has_value(); }

  /// The field, or nullptr when absent or null.
  [[nodiscard]] const json* get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null())
      return nullptr;
    return &*it;
  }

  void fail(std::string message, std::string param) {
    if (!error)
      error = bad_request(std::move(message), std::move(param));
  }

  /// An integer in [lo, hi]; integral floats count (16.0).
  std::optional<int64_t> integer(const json& j, const std::string& name, int64_t lo,
                                 int64_t hi) {
    std::optional<int64_t> v;
    if (j.is_number_integer() && !j.is_number_unsigned()) {
      v = j.get<int64_t>();
    } else if (j.is_number_unsigned()) {
      auto u = j.get<uint64_t>();
      v = u > static_cast<uint64_t>(int64_max) ? int64_max : static_cast<int64_t>(u);
    } else if (j.is_number_float()) {
      double d = j.get<double>();
      if (std::isfinite(d) && std::floor(d) == d && d >= -9.2e18 && d <= 9.2e18)
        v = static_cast<int64_t>(d);
    }
    if (!v) {
      fail(name + " must be an integer " + range(lo, hi) + ", got " + given(j, name), name);
      return std::nullopt;
    }
    if (*v < lo) {
      fail(name + " must be an integer >= " + std::to_string(lo) + ", got " + given(j, name), name);
      return std::nullopt;
    }
    if (*v > hi) {
      fail(name + " must be an integer <= " + std::to_string(hi) + ", got " + given(j, name), name);
      return std::nullopt;
    }
    return v;
  }

  std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) {
    const json* j = get(key);
    if (j == nullptr || failed())
      return std::nullopt;
    return integer(*j, key, lo, hi);
  }

  /// A number in [lo, hi], or (lo, hi] when `lo_open`.
  std::optional<double> number(const char* key, double lo, double hi, bool lo_open = false) {
    const json* j = get(key);
    if (j == nullptr || failed())
      return std::nullopt;
    std::string want = std::string{key} + " must be a number in " + (lo_open ? "(" : "[")
                       + show(lo) + ", " + show(hi) + "], got ";
    if (!j->is_number()) {
      fail(want + describe(*j), key);
      return std::nullopt;
    }
    auto in_range = [&](double x) { return std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi; };
    const double d = j->get<double>();
    if (!in_range(d)) {
      fail(want + given(*j, key), key);
      return std::nullopt;
    }
    // The sampling parameters are 32-bit floats: 1e-300 is in (0, 1] but
    // becomes 0, which the engine would refuse with a confusing "got 0".
    const double f = static_cast<double>(static_cast<float>(d));
    if (!in_range(f)) {
      fail(want + given(*j, key) + " (" + show(f) + " as a 32-bit float)", key);
      return std::nullopt;
    }
    return d;
  }

  std::optional<bool> boolean(const json& j, const std::string& name) {
    if (!j.is_boolean()) {
      fail(name + " must be a boolean, got " + given(j, name), name);
      return std::nullopt;
    }
    return j.get<bool>();
  }

  std::optional<bool> boolean(const char* key) {
    const json* j = get(key);
    if (j == nullptr || failed())
      return std::nullopt;
    return boolean(*j, key);
  }

  /// A string of valid UTF-8 of at most `max_bytes`.
  std::optional<std::string> string(const json& j, const std::string& name, size_t max_bytes) {
    if (!j.is_string()) {
      fail(name + " must be a string, got " + given(j, name), name);
      return std::nullopt;
    }
    const auto& s = j.get_ref<const std::string&>();
    if (!engine::utf8_is_valid(s)) {
      fail(name + " is not valid UTF-8", name);
      return std::nullopt;
    }
    if (s.size() > max_bytes) {
      fail(name + " is " + std::to_string(s.size()) + " bytes, more than the limit of "
             + std::to_string(max_bytes),
           name);
      return std::nullopt;
    }
    return s;
  }

  std::optional<std::string> string(const char* key, size_t max_bytes) {
    const json* j = get(key);
    if (j == nullptr || failed())
      return std::nullopt;
    return string(*j, key, max_bytes);
  }

  [[nodiscard]] const api_limits& limits() const { return limits_; }

private:
  // A number as the client wrote it (its JSON text, cut to
  // max_quoted_bytes), or describe() for everything else.
  std::string given(const json& j, std::string_view name) const {
    if (raw_ != nullptr && j.is_number())
      if (auto it = raw_->find(name); it != raw_->end())
        return it->second;
    return describe(j);
  }

  static std::string range(int64_t lo, int64_t hi) {
    if (hi == int64_max)
      return ">= " + std::to_string(lo);
    return "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  }

  const json& obj_;
  const api_limits& limits_;
  const raw_numbers* raw_ = nullptr;
};

/// The chat `messages` of `r`'s body into `req.messages` (openai_messages.cpp);
/// the first problem is recorded in `r`.
void read_messages(field_reader& r, api_request& req);

} // namespace tessera::actors::frontend::openai_detail
