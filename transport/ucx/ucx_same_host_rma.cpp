// ucx_core's same-host path: a second UCX context with RMA and only
// shared-memory transports, endpoints on it to peers that came through the
// same-host door (ucx_same_host.hpp: same uid and host by SO_PEERCRED, and
// the cluster secret), the keys of our regions sent to them over it, and
// nothing else. The cluster context stays RMA-free for everyone.
//
// Why a peer there may hold keys to whole regions: it runs as our uid on
// our host, so ptrace, /proc/PID/mem or process_vm_writev reach all of our
// memory already. What stays as on the cluster path: the handshake, the
// sessions on every active message, control messages and batch notices on
// the cluster endpoint, and a notice outside the sender's grants gets it
// refused (on_batch).

#include "transport/ucx/ucx_core.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace tessera::transport::detail {

caf::error ucx_core::init_local_ucx() {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucp_config_t* config = nullptr;
  auto st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK)
    return ucx_error(transport_errc::unavailable, "ucp_config_read (same-host)", st);
  // Shared memory only (posix, sysv, cma, ... and self): nothing of this
  // context is reachable from another host, whatever UCX_TLS says.
  st = ucp_config_modify(config, "TLS", "sm,self");
  if (st == UCS_OK)
    st = ucp_init(&params, config, &local_context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    local_context_ = nullptr;
    return ucx_error(transport_errc::unavailable, "ucp_init (same-host, sm,self)", st);
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  st = ucp_worker_create(local_context_, &wp, &local_worker_);
  if (st != UCS_OK) {
    local_worker_ = nullptr;
    destroy_local_ucx();
    return ucx_error(transport_errc::unavailable, "ucp_worker_create (same-host)", st);
  }
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = ucp_worker_get_address(local_worker_, &addr, &len);
  if (st == UCS_OK) {
    auto* b = reinterpret_cast<const std::byte*>(addr);
    local_address_.assign(b, b + len);
    ucp_worker_release_address(local_worker_, addr);
    st = ucp_worker_get_efd(local_worker_, &local_fd_);
  }
  if (st == UCS_OK) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB
                    | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = am_local_regions;
    hp.cb = &ucx_core::on_local_am;
    hp.arg = this;
    st = ucp_worker_set_am_recv_handler(local_worker_, &hp);
  }
  if (st != UCS_OK) {
    destroy_local_ucx();
    return ucx_error(transport_errc::unavailable, "same-host worker set-up", st);
  }
  return {};
}

void ucx_core::destroy_local_ucx() {
  if (local_worker_ != nullptr)
    ucp_worker_destroy(local_worker_);
  if (local_context_ != nullptr)
    ucp_cleanup(local_context_);
  local_worker_ = nullptr;
  local_context_ = nullptr;
  local_fd_ = -1;
  local_address_.clear();
}

bool ucx_core::add_local_ep(peer& p, const std::vector<std::byte>& address) {
  if (local_worker_ == nullptr)
    return false;
  ucp_ep_params_t params{};
  // No peer error handling: UCX 1.13's shared-memory transports have none.
  // A peer that dies is found on its cluster endpoint, which closes this.
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  auto st = ucp_ep_create(local_worker_, &params, &p.local_ep);
  if (st != UCS_OK) {
    p.local_ep = nullptr;
    spdlog::warn("ucx: peer {} ('{}'): no same-host endpoint ({}); it takes the grant path",
                 p.id, p.identity, ucs_status_string(st));
    return false;
  }
  p.local_keys_pending = true;
  return true;
}

void ucx_core::send_local_regions(peer& p, const std::vector<region_id>& which) {
  if (p.local_ep == nullptr || p.state == peer_state::failed)
    return;
  writer w;
  std::vector<const local_region*> out;
  for (const auto& [id, r] : regions_)
    if (!r.local_rkey.empty() && (which.empty() || std::ranges::count(which, id) > 0))
      out.push_back(&r);
  w.put<uint32_t>(static_cast<uint32_t>(out.size()));
  for (const auto* r : out)
    encode_region(w, *r, r->local_rkey);
  am_send(p, am_local_regions, {}, std::move(w.out), {}, true);
}

void ucx_core::on_local_regions(peer& p, reader& rd) {
  // Only a peer we made a same-host endpoint to has keys to give; without
  // one (it could not be created) its keys are of no use.
  if (p.local_ep == nullptr)
    return;
  auto n = rd.get<uint32_t>();
  for (uint32_t i = 0; i < n && rd.ok; ++i) {
    auto id = rd.get<uint32_t>();
    auto base = rd.get<uint64_t>();
    auto size = rd.get<uint64_t>();
    auto len = rd.get<uint32_t>();
    auto* buf = rd.take(len);
    if (!rd.ok || len == 0)
      break;
    if (p.regions.size() >= max_peer_regions && !p.regions.contains(id))
      return refuse_peer(p, rejection::not_granted,
                         "over " + std::to_string(max_peer_regions) + " regions announced");
    ucp_rkey_h rkey = nullptr;
    if (ucp_ep_rkey_unpack(p.local_ep, buf, &rkey) != UCS_OK)
      continue;
    auto& r = p.regions[id];
    if (r.local_rkey != nullptr)
      ucp_rkey_destroy(r.local_rkey);
    r.base = base;
    r.size = size;
    r.local_rkey = rkey;
    r.local_mapped = mapping_of(rkey, base, size);
  }
  if (!rd.ok)
    return refuse_peer(p, rejection::malformed, "a truncated same-host region list");
  p.local_keys_pending = false;
  if (p.state == peer_state::connected && p.connect_promise) {
    p.connect_promise->set_value(p.id);
    p.connect_promise.reset();
  }
}

ucp_mem_h ucx_core::map_local(std::span<std::byte> memory) {
  if (local_context_ == nullptr)
    return nullptr;
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = memory.data();
  mp.length = memory.size();
  ucp_mem_h memh = nullptr;
  auto st = ucp_mem_map(local_context_, &mp, &memh);
  if (st != UCS_OK) {
    spdlog::warn("ucx: a region of {} bytes is not mapped for same-host puts ({}); blocks "
                 "into it take the grant path",
                 memory.size(), ucs_status_string(st));
    return nullptr;
  }
  return memh;
}

bool ucx_core::same_host_keyed(const peer& p, const transfer_batch& b) const {
  if (p.local_ep == nullptr || b.blocks.empty())
    return false;
  return std::all_of(b.blocks.begin(), b.blocks.end(), [&](const block_copy& c) {
    auto r = p.regions.find(c.dst);
    auto l = regions_.find(c.src);
    return r != p.regions.end() && r->second.local_rkey != nullptr && l != regions_.end()
           && l->second.local_memh != nullptr;
  });
}

bool ucx_core::same_host(peer_id peer) {
  auto r = call<bool>([this, peer]() -> caf::expected<bool> {
    auto it = peers_.find(peer);
    return it != peers_.end() && it->second.state == peer_state::connected
           && it->second.local_ep != nullptr && !it->second.local_keys_pending;
  });
  return r && *r;
}

} // namespace tessera::transport::detail
