#pragma once
/// @file
/// How the UCX backend moves KV block batches, and how `automatic` picks
/// one. UCX-free: the choice is made from the transport's configuration
/// alone, because UCX 1.13 cannot say which transport an endpoint's RMA
/// lanes use (no lane query in ucp_ep_query).

#include <optional>
#include <string>
#include <string_view>

#include <caf/expected.hpp>

namespace tessera::transport {

/// The data path of ucx_transport::transfer (ucx_options::kv_path).
///
///  - put: one ucp_put_nbx per block into the peer's registered region,
///    an endpoint flush, then a "blocks arrived" message. Where the
///    peer's key maps its region into this process (UCX attached its
///    sysv/posix segment: what UCX's put there does is a memcpy), the
///    sender copies the blocks itself and sends the message right after
///    (nothing to flush: each copy is complete when it returns).
///    Zero-copy where UCX has real RMA between the two processes (cma,
///    knem, xpmem over shared memory; rc/dc over InfiniBand). Over tcp
///    UCX 1.13 emulates puts (software RMA: one active message per tcp
///    segment, copied into place by the receiver and acknowledged piece
///    by piece).
///  - am_rndv: a "batch" notice, then one active message per contiguous
///    run of blocks, forced onto UCX's rendezvous protocol and received
///    straight into the destination region at the run's offset; the
///    receiver checks each run against its own regions and acknowledges
///    the batch once every run landed. Over tcp this is what ucx_perftest
///    tag_bw measures (zero-copy from the source region on the sender).
enum class ucx_kv_path {
  /// put where the configuration promises real RMA, else am_rndv; see
  /// resolve_kv_path.
  automatic,
  put,
  am_rndv,
};

/// "auto", "put", "am_rndv".
[[nodiscard]] std::string_view to_string(ucx_kv_path path);

/// Parses what to_string writes; nullopt for anything else.
[[nodiscard]] std::optional<ucx_kv_path> parse_kv_path(std::string_view text);

/// The path a transport uses.
///  - `option` put / am_rndv: that.
///  - automatic with `env_override` set (TESSERA_UCX_KV_PATH, "put" or
///    "am_rndv"): that; another value is an error (invalid_message).
///  - automatic otherwise: put only when error handling is off and the
///    transport list (`tls`, else `env_tls` = UCX_TLS, else UCX's default
///    "all") allows a shared-memory transport with real RMA (sm, shm, cma,
///    knem, xpmem, all, or a "^..." exclusion list that does not exclude
///    them); else am_rndv. With peer error handling on, UCX 1.13 drops
///    every shared-memory transport (no peer failure handler) and on this
///    kind of machine is left with tcp; on InfiniBand its rendezvous uses
///    RDMA itself, so am_rndv loses nothing there.
/// Whether the transport list (`tls`, else `env_tls` = UCX_TLS, else UCX's
/// default "all") lets UCX use a shared-memory transport with real RMA:
/// what resolve_kv_path's put needs, and what turns on the same-host path
/// with a cluster secret (ucx_options::same_host_rma).
[[nodiscard]] bool allows_shared_memory(const std::string& tls, const char* env_tls);

[[nodiscard]] caf::expected<ucx_kv_path> resolve_kv_path(ucx_kv_path option,
                                                         const std::string& tls,
                                                         const char* env_tls,
                                                         const char* env_override,
                                                         bool peer_error_handling);

} // namespace tessera::transport
