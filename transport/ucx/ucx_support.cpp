#include "transport/ucx/ucx_support.hpp"

#include <arpa/inet.h>
#include <netdb.h>

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

std::string to_string(const sockaddr_storage& ss) {
  if (ss.ss_family != AF_INET)
    return "ucx-peer";
  auto& sa = reinterpret_cast<const sockaddr_in&>(ss);
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  return std::string{buf} + ":" + std::to_string(ntohs(sa.sin_port));
}

} // namespace tessera::transport::detail
