// The kernel's proof that a peer runs on this host as this user.

#include "transport/ucx/ucx_same_host.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "transport/transport_errc.hpp"

namespace tessera::transport::detail {

namespace {

std::string name_of(const sockaddr_in& sa) {
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
  return std::string{"tessera-ucx:"} + ip + ":" + std::to_string(ntohs(sa.sin_port));
}

/// Whether /proc/<pid>/ns/<ns> is the same namespace as ours.
bool same_namespace(pid_t pid, const char* ns) {
  struct stat mine{}, theirs{};
  auto path = "/proc/" + std::to_string(pid) + "/ns/" + ns;
  if (::stat((std::string{"/proc/self/ns/"} + ns).c_str(), &mine) != 0
      || ::stat(path.c_str(), &theirs) != 0)
    return false;
  return mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev;
}

} // namespace

socklen_t same_host_socket(const sockaddr_in& sa, sockaddr_un& out) {
  out = sockaddr_un{};
  out.sun_family = AF_UNIX;
  auto name = name_of(sa);
  // sun_path[0] = '\0': the abstract namespace; the name is not
  // NUL-terminated, its length is the address length.
  std::memcpy(out.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

std::string same_host_socket_name(const sockaddr_in& sa) {
  // Appended, not "@" + ...: GCC 12's -Wrestrict false positive (PR 105651).
  std::string out{"@"};
  out += name_of(sa);
  return out;
}

caf::expected<peer_credentials> credentials_of(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return make_transport_error(transport_errc::unauthenticated,
                                std::string{"same-host door: SO_PEERCRED: "}
                                  + std::strerror(errno));
  return peer_credentials{cred.pid, cred.uid, cred.gid};
}

std::string why_not_same_host(const peer_credentials& c) {
  if (c.uid != ::geteuid())
    return "its uid " + std::to_string(c.uid) + " is not ours (" + std::to_string(::geteuid())
           + ")";
  // The kernel reports 0 for a pid our pid namespace cannot see.
  if (c.pid <= 0)
    return "its process is not visible in our pid namespace";
  for (const char* ns : {"pid", "ipc", "mnt", "user"})
    if (!same_namespace(c.pid, ns))
      return std::string{"it is in another "} + ns + " namespace";
  return {};
}

std::string describe(const peer_credentials& c) {
  return "pid " + std::to_string(c.pid) + ", uid " + std::to_string(c.uid);
}

std::vector<std::byte> pack_worker_addresses(std::span<const std::byte> cluster,
                                             std::span<const std::byte> local) {
  std::vector<std::byte> out(4 + cluster.size() + local.size());
  auto n = static_cast<uint32_t>(cluster.size());
  std::memcpy(out.data(), &n, 4);
  if (!cluster.empty())
    std::memcpy(out.data() + 4, cluster.data(), cluster.size());
  if (!local.empty())
    std::memcpy(out.data() + 4 + cluster.size(), local.data(), local.size());
  return out;
}

bool unpack_worker_addresses(std::span<const std::byte> both, std::vector<std::byte>& cluster,
                             std::vector<std::byte>& local) {
  if (both.size() < 4)
    return false;
  uint32_t n = 0;
  std::memcpy(&n, both.data(), 4);
  if (n == 0 || n >= both.size() - 4)
    return false; // both parts must be non-empty
  cluster.assign(both.begin() + 4, both.begin() + 4 + n);
  local.assign(both.begin() + 4 + n, both.end());
  return true;
}

} // namespace tessera::transport::detail
