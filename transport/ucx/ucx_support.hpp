#pragma once
/// @file
/// Internal to transport/ucx: the byte layout of the backend's own control
/// messages (hello, region announcements, batch notices) and host:port
/// address handling. No UCX types here.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

namespace tessera::transport::detail {

/// Appends plain values to a byte buffer (same-host byte order: both ends
/// of a UCX connection run this code on the same architecture).
struct writer {
  std::vector<std::byte> out;
  template <class T>
  void put(T v) {
    auto n = out.size();
    out.resize(n + sizeof(T));
    std::memcpy(out.data() + n, &v, sizeof(T));
  }
  void bytes(const void* p, size_t n) {
    auto m = out.size();
    out.resize(m + n);
    if (n > 0)
      std::memcpy(out.data() + m, p, n);
  }
};

/// Reads what writer wrote; `ok` turns false (and stays false) on a short
/// buffer instead of reading past it.
struct reader {
  const std::byte* p;
  size_t n;
  bool ok = true;
  template <class T>
  T get() {
    T v{};
    if (n < sizeof(T)) {
      ok = false;
      return v;
    }
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    n -= sizeof(T);
    return v;
  }
  const std::byte* take(size_t k) {
    if (n < k) {
      ok = false;
      return nullptr;
    }
    auto r = p;
    p += k;
    n -= k;
    return r;
  }
};

/// Parses "host:port" (IPv4 address or a resolvable name) into `sa`.
[[nodiscard]] bool parse_address(const std::string& address, sockaddr_in& sa);

/// The name of the network interface that holds IPv4 address `host` (a
/// literal or a resolvable name), e.g. "lo" for 127.0.0.1; empty for
/// "0.0.0.0" (every interface). Errors: invalid_message naming the
/// address when it does not resolve or no interface holds it.
[[nodiscard]] caf::expected<std::string> interface_of(const std::string& host);

/// "a.b.c.d:port" of an IPv4 socket address ("ucx-peer" for others).
[[nodiscard]] std::string to_string(const sockaddr_storage& ss);

} // namespace tessera::transport::detail
