#pragma once
/// @file
/// Internal to transport/ucx: what proves that a peer runs on this host as
/// this user, so that one-sided puts to it and from it expose nothing
/// (no UCX types here).
///
/// A process of the same uid on the same host could already read and
/// write all of this one's memory (ptrace, /proc/PID/mem,
/// process_vm_writev): a key to our KV pool gives it nothing it does not
/// have. So such a peer, once it also proved the cluster secret, may put
/// into our regions directly over shared memory (ucx_core's same-host
/// context, sm transports only), while every other peer writes only into
/// granted ranges by rendezvous.
///
/// The proof comes from the kernel, not from the peer's word: the front
/// door also listens on an abstract unix socket named after its TCP
/// address (same_host_socket), and each side reads the other's
/// credentials with SO_PEERCRED, which the kernel fills in at connect()
/// and listen() and no process can forge. Why an abstract name and not a
/// socket file in a 0700 directory: nothing is left on disk after a crash
/// (a stale file would block the restart), no shared writable directory
/// is raced over, and it is scoped to the network namespace (a container
/// with its own cannot even see it). Anyone in the namespace may connect
/// or squat the name; both are answered by the credential check on each
/// side plus the HMAC handshake that still runs over it.

#include <sys/types.h>
#include <sys/un.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <netinet/in.h>

namespace tessera::transport::detail {

/// The abstract unix socket of the front door listening at `sa`
/// ("@tessera-ucx:a.b.c.d:port"): fills `out`, returns its length.
[[nodiscard]] socklen_t same_host_socket(const sockaddr_in& sa, sockaddr_un& out);

/// Its name for messages, "@tessera-ucx:a.b.c.d:port".
[[nodiscard]] std::string same_host_socket_name(const sockaddr_in& sa);

/// The process at the other end of a connected unix socket.
struct peer_credentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// The kernel's record of `fd`'s peer (SO_PEERCRED). Errors:
/// unauthenticated naming the failed call.
[[nodiscard]] caf::expected<peer_credentials> credentials_of(int fd);

/// Empty when `c` is a process of this process's effective uid, visible in
/// its pid namespace and sharing its pid, ipc, mount and user namespaces
/// (so its shared-memory segments and process_vm_writev reach us as ours
/// reach it); else why not, for the log.
[[nodiscard]] std::string why_not_same_host(const peer_credentials& c);

/// "pid 12, uid 0" for messages.
[[nodiscard]] std::string describe(const peer_credentials& c);

/// Both UCX worker addresses a same-host handshake offers in its one
/// address field (the cluster one, then the shared-memory one).
[[nodiscard]] std::vector<std::byte> pack_worker_addresses(std::span<const std::byte> cluster,
                                                           std::span<const std::byte> local);

/// Splits what pack_worker_addresses wrote; false for anything else
/// (lengths that do not add up, an empty part).
[[nodiscard]] bool unpack_worker_addresses(std::span<const std::byte> both,
                                           std::vector<std::byte>& cluster,
                                           std::vector<std::byte>& local);

} // namespace tessera::transport::detail
