#include "cluster/host_port.hpp"
#include "cluster/nearest_name.hpp"

#include <algorithm>

#include <caf/sec.hpp>

#include <netdb.h>
#include <sys/socket.h>

namespace tessera::cluster {

namespace {

caf::error bad(const std::string& what) {
  return caf::make_error(caf::sec::invalid_argument, what);
}


const char* ipv4_only_text = "IPv6 is not supported for node addresses (the cluster transport listens and "
                             "dials over IPv4 only): use an IPv4 address such as 127.0.0.1:14000, or a "
                             "host name that resolves to one";

} // namespace

caf::expected<host_port> parse_host_port(std::string_view value, const std::string& key, address_family family) {
  const std::string at = key + " " + quote_input(value);
  std::string_view host;
  std::string_view port;
  if (value.starts_with('[')) {
    const auto close = value.find(']');
    if (close == std::string_view::npos || close + 1 >= value.size() || value[close + 1] != ':')
      return bad(at + ": write an IPv6 endpoint as [address]:port, e.g. [::1]:8000");
    if (family == address_family::ipv4_only)
      return bad(at + ": " + ipv4_only_text);
    host = value.substr(1, close - 1);
    port = value.substr(close + 2);
  } else {
    const auto colon = value.rfind(':');
    if (colon == std::string_view::npos)
      return bad(key + " must be host:port, got " + quote_input(value));
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      if (family == address_family::ipv4_only)
        return bad(at + ": " + ipv4_only_text);
      return bad(at + ": an IPv6 address needs brackets: [" + std::string{host} + "]:" + std::string{port});
    }
  }
  if (host.empty())
    return bad(at + " has no host (use 127.0.0.1 for this machine only, 0.0.0.0 for every interface)");
  unsigned p = 0;
  bool ok = !port.empty() && port.size() <= 5;
  for (char ch : port)
    if (ch < '0' || ch > '9')
      ok = false;
    else
      p = p * 10 + static_cast<unsigned>(ch - '0');
  if (!ok || p > 65535)
    return bad(key + " has a bad port: " + quote_input(value) + " (a port is a number in 0..65535)");
  return host_port{std::string{host}, static_cast<uint16_t>(p)};
}

std::string join_host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

caf::expected<std::vector<std::string>> resolve_host(const std::string& host, address_family family) {
  addrinfo hints{};
  hints.ai_family = family == address_family::ipv4_only ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    if (family == address_family::ipv4_only && (rc == EAI_ADDRFAMILY || rc == EAI_NODATA)) {
      // Resolvable, but not to IPv4: say so rather than "not found".
      addrinfo any{};
      any.ai_socktype = SOCK_STREAM;
      addrinfo* other = nullptr;
      if (::getaddrinfo(host.c_str(), nullptr, &any, &other) == 0) {
        ::freeaddrinfo(other);
        return bad("host " + quote_input(host) + " has no IPv4 address; " + ipv4_only_text);
      }
    }
    return bad("cannot resolve host " + quote_input(host) + " (" + ::gai_strerror(rc) +
               "): check the name, or write an IP address");
  }
  std::vector<std::string> ips;
  for (auto* a = list; a != nullptr; a = a->ai_next) {
    char text[NI_MAXHOST];
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof(text), nullptr, 0, NI_NUMERICHOST) != 0)
      continue;
    if (std::find(ips.begin(), ips.end(), text) == ips.end())
      ips.emplace_back(text);
  }
  ::freeaddrinfo(list);
  if (ips.empty())
    return bad("host " + quote_input(host) + " resolves to no usable address");
  return ips;
}

} // namespace tessera::cluster
