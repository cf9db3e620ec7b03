#pragma once
/// @file
/// Internal to transport/wire: how capnp_body.cpp and capnp_client.cpp
/// write and read fields. A field that fails a check is thrown as
/// decode_failure and caught in decode_body, which names the message kind;
/// nothing of it leaves transport/wire.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <capnp/blob.h>

#include "transport/transport_errc.hpp"

namespace tessera::transport::wire::fields {

inline capnp::Text::Reader text(const std::string& str) {
  return {str.c_str(), str.size()};
}

template <class Builder>
void put_ints(Builder list, const std::vector<int32_t>& v) {
  for (unsigned i = 0; i < v.size(); ++i)
    list.set(i, v[i]);
}

/// A field the decoder refuses.
struct decode_failure {
  transport_errc code;
  std::string what;
};

[[noreturn]] inline void refuse(std::string what) {
  throw decode_failure{transport_errc::invalid_message, std::move(what)};
}

// Checks a list's or string's length before anything is copied, so a small
// frame cannot make the decoder allocate much more than its own size.
inline void bound(const std::string& field, size_t got, size_t max, const char* unit) {
  if (got > max)
    refuse(field + " has " + std::to_string(got) + " " + unit + ", more than the maximum " +
           std::to_string(max));
}

inline std::string get_text(const std::string& field, capnp::Text::Reader t, size_t max) {
  bound(field, t.size(), max, "bytes");
  return std::string(t.cStr(), t.size());
}

template <class T, class ListReader>
std::vector<T> get_list(const std::string& field, ListReader list, size_t max, const char* unit) {
  bound(field, list.size(), max, unit);
  std::vector<T> out;
  out.reserve(list.size());
  for (auto v : list)
    out.push_back(static_cast<T>(v));
  return out;
}

} // namespace tessera::transport::wire::fields
