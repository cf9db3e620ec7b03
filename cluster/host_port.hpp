#pragma once
/// @file
/// Addresses in a cluster config: "host:port" or "[IPv6]:port", parsed and
/// resolved (getaddrinfo) so that two spellings of one endpoint
/// (localhost:14000, 127.0.0.1:14000) are seen to be the same.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::cluster {

/// Which addresses a key accepts. Node (transport) addresses are IPv4 only:
/// the UCX transport and its front door listen and dial over IPv4
/// (transport/ucx/ucx_support.cpp); HTTP and metrics endpoints take both.
enum class address_family { ipv4_only, any };

/// A parsed endpoint. `host` has no brackets ("::1", "localhost").
struct host_port {
  std::string host;
  uint16_t port = 0;
};

/// Parses `value` ("host:port", or "[v6]:port" where `family` allows
/// IPv6). Errors (caf::sec::invalid_argument) name `key` and say what is
/// accepted: no port, a bad port, an empty host, an IPv6 address without
/// brackets, IPv6 where only IPv4 works. Does not resolve.
[[nodiscard]] caf::expected<host_port> parse_host_port(std::string_view value, const std::string& key,
                                                       address_family family);

/// "host:port", with brackets around an IPv6 host.
[[nodiscard]] std::string join_host_port(const std::string& host, uint16_t port);

/// The numeric addresses `host` resolves to ("127.0.0.1", "::1"), without
/// repeats. Errors (caf::sec::invalid_argument) name the host and the
/// resolver's reason, or say it has no IPv4 address where one is needed.
/// Blocks on the system resolver.
[[nodiscard]] caf::expected<std::vector<std::string>> resolve_host(const std::string& host,
                                                                   address_family family);

} // namespace tessera::cluster
