#include "transport/ucx/ucx_support.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>

#include "transport/transport_errc.hpp"

namespace tessera::transport::detail {

bool parse_address(const std::string& address, sockaddr_in& sa) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return false;
  auto host = address.substr(0, colon);
  auto port_str = address.substr(colon + 1);
  if (port_str.empty() || port_str.size() > 5)
    return false;
  unsigned port = 0;
  for (char c : port_str) {
    if (c < '0' || c > '9')
      return false;
    port = port * 10 + static_cast<unsigned>(c - '0');
  }
  if (port > 65535)
    return false;
  std::memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) == 1)
    return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
    return false;
  sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

caf::expected<std::string> interface_of(const std::string& host) {
  sockaddr_in sa{};
  if (!parse_address(host + ":0", sa))
    return make_transport_error(transport_errc::invalid_message,
                                "ucx: address '" + host + "' does not resolve to IPv4");
  if (sa.sin_addr.s_addr == htonl(INADDR_ANY))
    return std::string{};
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return make_transport_error(transport_errc::unavailable, "ucx: getifaddrs failed");
  std::string name;
  for (auto* i = list; i != nullptr; i = i->ifa_next)
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET
        && reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr
             == sa.sin_addr.s_addr) {
      name = i->ifa_name;
      break;
    }
  freeifaddrs(list);
  if (name.empty())
    return make_transport_error(transport_errc::invalid_message,
                                "ucx: no network interface of this host has address '" + host
                                  + "'");
  return name;
}

std::string to_string(const sockaddr_storage& ss) {
  if (ss.ss_family != AF_INET)
    return "ucx-peer";
  auto& sa = reinterpret_cast<const sockaddr_in&>(ss);
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  return std::string{buf} + ":" + std::to_string(ntohs(sa.sin_port));
}

} // namespace tessera::transport::detail
