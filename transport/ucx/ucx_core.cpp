// ucx_core's lifecycle: the UCX context and worker, the progress thread,
// the command queue with its eventfd wake-up, and shutdown.

#include "transport/ucx/ucx_core.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

namespace tessera::transport::detail {
namespace {

/// Sets UCX's keepalive so that a peer whose host vanishes while the
/// connection is idle is reported in about `peer_timeout`. Over tcp lanes
/// UCX 1.13 keeps nothing of its own alive (tcp counts as "built-in
/// keepalive"): it sets SO_KEEPALIVE with UCX_TCP_KEEPIDLE, KEEPINTVL and
/// KEEPCNT, whole seconds. We split peer_timeout (rounded up to whole
/// seconds, at least 2) into idle = half, then one probe a second for the
/// rest. Lanes without built-in keepalive (e.g. InfiniBand) get UCP's
/// keepalive round every `idle` seconds on every endpoint (UCX_KEEPALIVE_*;
/// UCX arms its round timer in whole seconds, so never below 1 s).
ucs_status_t configure_keepalive(ucp_config_t* config, std::chrono::milliseconds peer_timeout,
                                 std::string& failed) {
  auto total_s = std::max<long long>(2, (peer_timeout.count() + 999) / 1000);
  auto idle_s = total_s / 2;
  auto probes = total_s - idle_s;
  const std::pair<const char*, std::string> settings[] = {
    // ucp_config_modify caches names UCP does not know and applies them to
    // every transport's configuration: these reach the tcp interfaces.
    {"KEEPIDLE", std::to_string(idle_s) + "s"},
    {"KEEPINTVL", "1s"},
    {"KEEPCNT", std::to_string(probes)},
    {"KEEPALIVE_INTERVAL", std::to_string(idle_s) + "s"},
    {"KEEPALIVE_NUM_EPS", "inf"},
  };
  for (const auto& [name, value] : settings) {
    auto st = ucp_config_modify(config, name, value.c_str());
    if (st != UCS_OK) {
      failed = std::string{name} + "=" + value;
      return st;
    }
  }
  return UCS_OK;
}

/// Sets the tcp transport's segment sizes from `ucx` unless the
/// environment sets either (UCX's tcp interface refuses a receive segment
/// smaller than the send segment, so the two are left to the environment
/// together). As for keepalive, ucp_config_modify keeps names UCP does not
/// know and applies them to each transport's configuration; only tcp has
/// fields of these names.
ucs_status_t configure_tcp_segments(ucp_config_t* config, const ucx_options& ucx,
                                    std::string& failed) {
  if (std::getenv("UCX_TCP_TX_SEG_SIZE") || std::getenv("UCX_TCP_RX_SEG_SIZE"))
    return UCS_OK;
  const std::pair<const char*, size_t> settings[] = {
    {"TX_SEG_SIZE", ucx.tcp_tx_seg_bytes},
    {"RX_SEG_SIZE", ucx.tcp_rx_seg_bytes},
  };
  for (const auto& [name, bytes] : settings) {
    if (bytes == 0)
      continue;
    auto value = std::to_string(bytes);
    auto st = ucp_config_modify(config, name, value.c_str());
    if (st != UCS_OK) {
      failed = std::string{name} + "=" + value;
      return st;
    }
  }
  return UCS_OK;
}

/// The core whose progress thread this is (set by ucx_core::run()).
thread_local const ucx_core* progress_core = nullptr;

} // namespace

caf::error ucx_error(transport_errc code, const std::string& what, ucs_status_t st) {
  return make_transport_error(code, "ucx: " + what + ": " + ucs_status_string(st));
}

caf::error closed_error() {
  return make_transport_error(transport_errc::closed, "ucx: transport closed");
}

ucx_core::ucx_core(transport_options opts, ucx_options ucx) : opts_(opts), ucx_(ucx) {
  caps_.backend = "ucx";
  caps_.rma = !opts.grants_only;
  caps_.device_memory = false;
  caps_.max_message_bytes = opts.max_message_bytes;
}

caf::error ucx_core::start() {
  const char* env_path = std::getenv("TESSERA_UCX_KV_PATH");
  auto path = resolve_kv_path(ucx_.kv_path, ucx_.tls, std::getenv("UCX_TLS"), env_path,
                              ucx_.peer_error_handling);
  if (!path)
    return path.error();
  kv_path_ = *path;
  kv_path_by_batch_ = ucx_.kv_path == ucx_kv_path::automatic && kv_path_ == ucx_kv_path::am_rndv
                      && (env_path == nullptr || *env_path == '\0');
  if (opts_.grants_only) {
    // No peer holds a key to our memory, and we hold none to theirs: every
    // block goes by rendezvous into ranges the receiver granted.
    kv_path_ = ucx_kv_path::am_rndv;
    kv_path_by_batch_ = false;
  }
  kv_eager_max_ = ucx_.kv_eager_max_bytes;
  if (auto err = init_ucx())
    return err;
  // The same-host path (ucx_same_host_rma.cpp): only where a secret keeps
  // keys from everyone else, and the configuration asks for shared memory
  // with put as the KV path could take it (error handling off, a
  // shared-memory transport in the list, rendezvous not forced).
  const bool forced_rndv = ucx_.kv_path == ucx_kv_path::am_rndv
                           || (env_path != nullptr && std::string_view{env_path} == "am_rndv");
  if (opts_.grants_only && ucx_.same_host_rma && !ucx_.peer_error_handling && !forced_rndv
      && allows_shared_memory(ucx_.tls, std::getenv("UCX_TLS"))) {
    if (auto err = init_local_ucx())
      spdlog::warn("ucx: no same-host path ({}): peers on this host take the grant path",
                   caf::to_string(err));
  }
  thread_ = std::thread{[this] { run(); }};
  started_ = true;
  return {};
}

ucx_core::~ucx_core() {
  if (!started_)
    return;
  // The front doors first: a handshake finishing now registers its peer
  // through the progress thread, which must still be running.
  {
    std::lock_guard lock{doors_mu_};
    doors_.clear();
  }
  post([this] { shutdown(); });
  thread_.join();
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
  destroy_local_ucx();
  close(wake_fd_);
}

bool ucx_core::post(std::function<void()> fn) {
  {
    std::lock_guard lock{mu_};
    if (stopping_)
      return false;
    commands_.push_back(std::move(fn));
    has_commands_.store(true);
  }
  // A running or spinning thread finds the command on its own; a system
  // call per send was most of the cost of a small message.
  if (sleeping_.load()) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  }
  return true;
}

bool ucx_core::may_run_inline() const {
  return progress_core == this && !in_commands_ && !has_commands_.load(std::memory_order_acquire);
}

caf::error ucx_core::init_ucx() {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  // With grants only, no one-sided RMA at all: UCX would otherwise carry
  // out a put from anyone who reaches its tcp port, with a key the sender
  // packed itself (tcp needs no key of ours), to any address in this
  // process. Rendezvous receives into granted ranges do not need it.
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP
                    | (opts_.grants_only ? 0 : UCP_FEATURE_RMA);
  // UCX_* environment variables apply first; ucx_options::tls overrides
  // UCX_TLS for this context only.
  ucp_config_t* config = nullptr;
  auto st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK)
    return ucx_error(transport_errc::unavailable, "ucp_config_read", st);
  if (!ucx_.tls.empty()) {
    st = ucp_config_modify(config, "TLS", ucx_.tls.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return ucx_error(transport_errc::unavailable, "transport list '" + ucx_.tls + "'", st);
    }
  }
  if (!ucx_.net_address.empty() && std::getenv("UCX_NET_DEVICES") == nullptr) {
    auto dev = interface_of(ucx_.net_address);
    if (!dev) {
      ucp_config_release(config);
      return dev.error();
    }
    // Only the configured interface: UCX's tcp transport otherwise listens
    // on every interface (on ephemeral ports).
    if (!dev->empty()) {
      st = ucp_config_modify(config, "NET_DEVICES", dev->c_str());
      if (st != UCS_OK) {
        ucp_config_release(config);
        return ucx_error(transport_errc::unavailable, "NET_DEVICES=" + *dev, st);
      }
    }
  }
  {
    std::string failed;
    st = configure_tcp_segments(config, ucx_, failed);
    if (st != UCS_OK) {
      ucp_config_release(config);
      return ucx_error(transport_errc::unavailable, "tcp segment setting " + failed, st);
    }
  }
  // Keepalive only runs on endpoints with UCP_ERR_HANDLING_MODE_PEER.
  if (ucx_.peer_error_handling) {
    std::string failed;
    st = configure_keepalive(config, opts_.peer_timeout, failed);
    if (st != UCS_OK) {
      ucp_config_release(config);
      return ucx_error(transport_errc::unavailable, "keepalive setting " + failed, st);
    }
  }
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK)
    return ucx_error(transport_errc::unavailable, "ucp_init", st);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    ucp_cleanup(context_);
    return ucx_error(transport_errc::unavailable, "ucp_worker_create", st);
  }
  {
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    st = ucp_worker_get_address(worker_, &addr, &len);
    if (st != UCS_OK) {
      ucp_worker_destroy(worker_);
      ucp_cleanup(context_);
      return ucx_error(transport_errc::unavailable, "ucp_worker_get_address", st);
    }
    auto* b = reinterpret_cast<const std::byte*>(addr);
    worker_address_.assign(b, b + len);
    ucp_worker_release_address(worker_, addr);
  }
  st = ucp_worker_get_efd(worker_, &worker_fd_);
  if (st != UCS_OK) {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    return ucx_error(transport_errc::unavailable, "ucp_worker_get_efd", st);
  }
  {
    // A folded batch's run 0 header (session, block header, notice) must
    // fit what ucp_am_send_nbx takes; without the figure, nothing folds.
    ucp_worker_attr_t attr{};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    constexpr size_t fixed = session_bytes + kv_block_header_bytes;
    kv_fold_max_ = 0;
    if (ucp_worker_query(worker_, &attr) == UCS_OK && attr.max_am_header > fixed)
      kv_fold_max_ = std::min(kv_folded_notice_max_bytes, attr.max_am_header - fixed);
  }
  const std::pair<unsigned, ucp_am_recv_callback_t> handlers[] = {
    {am_hello, &ucx_core::on_am_id<am_hello>},
    {am_hello_ack, &ucx_core::on_am_id<am_hello_ack>},
    {am_message, &ucx_core::on_am_id<am_message>},
    {am_region, &ucx_core::on_am_id<am_region>},
    {am_batch, &ucx_core::on_am_id<am_batch>},
    {am_bye, &ucx_core::on_am_id<am_bye>},
    {am_kv_batch, &ucx_core::on_am_id<am_kv_batch>},
    {am_kv_block, &ucx_core::on_am_id<am_kv_block>},
    {am_kv_ack, &ucx_core::on_am_id<am_kv_ack>},
    {am_kv_acks, &ucx_core::on_am_id<am_kv_acks>},
  };
  for (const auto& [id, cb] : handlers) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB
                    | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = id;
    hp.cb = cb;
    hp.arg = this;
    st = ucp_worker_set_am_recv_handler(worker_, &hp);
    if (st != UCS_OK) {
      ucp_worker_destroy(worker_);
      ucp_cleanup(context_);
      return ucx_error(transport_errc::unavailable, "set AM handler", st);
    }
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    return make_transport_error(transport_errc::unavailable, "ucx: eventfd failed");
  }
  return {};
}

bool ucx_core::run_commands() {
  if (!has_commands_.load(std::memory_order_acquire))
    return false;
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard lock{mu_};
    batch.swap(commands_);
    has_commands_.store(false, std::memory_order_relaxed);
  }
  in_commands_ = true;
  for (auto& fn : batch)
    fn();
  in_commands_ = false;
  return !batch.empty();
}

void ucx_core::run() {
  progress_core = this;
  // Work was done at `last_busy`; the loop keeps polling until
  // progress_spin passed since then, and sleeps after.
  auto last_busy = clock::now();
  auto no_spin_until = last_busy;
  // A yield that took longer than this found the CPUs busy (one that hands
  // the core to a CPU-bound thread takes milliseconds; shorter hiccups,
  // e.g. the host running another vCPU, do not count); spinning then stays
  // off for contended_backoff (one slow yield per backoff at most).
  constexpr auto contended_yield = std::chrono::microseconds{50};
  constexpr auto contended_backoff = std::chrono::milliseconds{100};
  constexpr auto hot_spin = std::chrono::microseconds{20};
  while (!done_) {
    bool did = run_commands();
    // The batches that landed in one progress call are acknowledged
    // together right after it (ucx_kv_am.hpp: am_kv_acks).
    while (ucp_worker_progress(worker_) != 0) {
      did = true;
      kv_flush_acks();
    }
    if (local_worker_ != nullptr)
      while (ucp_worker_progress(local_worker_) != 0)
        did = true;
    kv_flush_acks();
    reap_close_requests();
    // After draining the worker: completions and messages that waited
    // while this thread was busy count as progress before any is judged.
    check_stalled_peers();
    if (done_)
      break;
    auto now = clock::now();
    if (did) {
      last_busy = now;
      continue;
    }
    // Right after work, poll without yielding: a reply to what was just
    // sent comes within microseconds (a shared-memory round trip is under
    // one), and a yield is a system call that may hand the core away.
    if (now - last_busy < std::min<clock::duration>(hot_spin, ucx_.progress_spin))
      continue;
    if (now - last_busy < ucx_.progress_spin && now >= no_spin_until) {
      // Let a runnable thread have this core while we wait: on a busy
      // machine (an engine beside us) a spin that holds the core delays
      // the very thread whose reply it waits for. On an idle core
      // sched_yield() returns at once (well under a microsecond). Where it
      // did not, other threads want the CPUs: a spinning thread then waits
      // behind them for a whole time slice (milliseconds), while a
      // sleeping one is woken ahead of them, so stop spinning for a while.
      sched_yield();
      auto after = clock::now();
      if (after - now > contended_yield)
        no_spin_until = after + contended_backoff;
      continue;
    }
    sleep_until_woken();
  }
}

void ucx_core::sleep_until_woken() {
  sleeping_.store(true);
  if (has_commands_.load()) {
    sleeping_.store(false, std::memory_order_relaxed);
    return;
  }
  if (ucp_worker_arm(worker_) == UCS_ERR_BUSY
      || (local_worker_ != nullptr && ucp_worker_arm(local_worker_) == UCS_ERR_BUSY)) {
    sleeping_.store(false, std::memory_order_relaxed);
    return;
  }
  // poll() skips the negative fd of a missing same-host worker.
  pollfd fds[3] = {{worker_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {local_fd_, POLLIN, 0}};
  ::poll(fds, 3, poll_timeout_ms());
  sleeping_.store(false, std::memory_order_relaxed);
  // Only when it was written: a read() of an empty eventfd is a wasted
  // system call on every wake-up. (A write that lands after poll()
  // returned is read after the next one, which then returns at once.)
  if (fds[1].revents & POLLIN) {
    uint64_t v = 0;
    [[maybe_unused]] auto n = ::read(wake_fd_, &v, sizeof(v));
  }
}

int ucx_core::poll_timeout_ms() const {
  constexpr int cap_ms = 50;
  if (!ucx_.peer_error_handling)
    return cap_ms;
  auto until_check = std::chrono::ceil<std::chrono::milliseconds>(next_stall_check_ - clock::now());
  return static_cast<int>(std::clamp<long long>(until_check.count(), 0, cap_ms));
}

void ucx_core::reap_close_requests() {
  for (auto it = close_requests_.begin(); it != close_requests_.end();) {
    if (ucp_request_check_status(*it) != UCS_INPROGRESS) {
      ucp_request_free(*it);
      it = close_requests_.erase(it);
    } else {
      ++it;
    }
  }
}

void ucx_core::shutdown() {
  {
    std::lock_guard lock{mu_};
    stopping_ = true;
  }
  run_commands(); // commands posted before the destructor still run
  shutting_down_ = true;
  for (auto& [id, p] : peers_)
    if (p.state != peer_state::failed && p.ep) {
      am_send(p, am_bye, {}, {}, {});
      fail_peer(id, closed_error(), false);
    }
  // Let the BYEs and graceful closes finish, bounded by peer_timeout.
  auto deadline = std::chrono::steady_clock::now() + opts_.peer_timeout;
  auto progress_all = [this] {
    auto n = ucp_worker_progress(worker_);
    if (local_worker_ != nullptr)
      n += ucp_worker_progress(local_worker_);
    return n;
  };
  while (!close_requests_.empty() && std::chrono::steady_clock::now() < deadline) {
    progress_all();
    reap_close_requests();
  }
  for (auto* r : close_requests_) {
    // Only the shared-memory endpoints' closes, which are local, may
    // belong to the other worker; cancelling on the wrong one is a no-op.
    ucp_request_cancel(worker_, r);
  }
  while (progress_all() != 0) {
  }
  reap_close_requests();
  // Closes a silent peer never answered (cancel does not end them):
  // release them, so that ucp_worker_destroy completes and frees them as it
  // destroys their endpoints. (UCX asserts that a close request still
  // pending at worker destruction was released.)
  for (auto* r : close_requests_)
    ucp_request_free(r);
  close_requests_.clear();
  for (auto& [id, r] : regions_) {
    // The cluster context's mapping first: the shared-memory one may own
    // the memory (allocate_region).
    ucp_mem_unmap(context_, r.memh);
    if (r.local_memh != nullptr)
      ucp_mem_unmap(local_context_, r.local_memh);
  }
  regions_.clear();
  // Anything UCX did not complete: fail it now (no UCX call touches it later).
  for (auto* op : ops_) {
    if (!op->finished && op->done)
      op->done(closed_error());
    op->finished = true;
  }
  done_ = true;
}

} // namespace tessera::transport::detail
