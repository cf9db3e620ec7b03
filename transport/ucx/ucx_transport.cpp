#include "transport/ucx/ucx_transport.hpp"

#include "transport/ucx/ucx_support.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tessera::transport {
namespace detail {
namespace {

enum am_id : unsigned {
  am_hello = 1,
  am_hello_ack = 2,
  am_message = 3,
  am_region = 4,
  am_batch = 5,
  am_bye = 6,
};

constexpr size_t max_actor_bytes = 64;

/// The one place a ucs_status_t becomes a caf::error.
caf::error ucx_error(transport_errc code, const std::string& what, ucs_status_t st) {
  return make_transport_error(code, "ucx: " + what + ": " + ucs_status_string(st));
}

caf::error closed_error() {
  return make_transport_error(transport_errc::closed, "ucx: transport closed");
}

} // namespace

/// The state behind a ucx_transport. Everything below "progress-thread
/// state" is touched by the progress thread only.
class ucx_core {
public:
  ucx_core(transport_options opts, ucx_options ucx) : opts_(opts), ucx_(ucx) {
    caps_.backend = "ucx";
    caps_.rma = true;
    caps_.device_memory = false;
    caps_.max_message_bytes = opts.max_message_bytes;
  }

  /// Initialises UCX and starts the progress thread; on failure nothing is
  /// left to clean up.
  [[nodiscard]] caf::error start() {
    if (auto err = init_ucx())
      return err;
    thread_ = std::thread{[this] { run(); }};
    started_ = true;
    return {};
  }

  ~ucx_core() {
    if (!started_)
      return;
    post([this] { shutdown(); });
    thread_.join();
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    close(wake_fd_);
  }

  const capabilities& caps() const { return caps_; }
  void set_handler(transport_handler* h) { handler_.store(h); }

  caf::expected<std::string> listen(const std::string& address) {
    sockaddr_in sa{};
    if (!parse_address(address, sa))
      return make_transport_error(transport_errc::invalid_message,
                                  "ucx: listen address '" + address + "' is not host:port");
    return call<std::string>([this, sa, address]() -> caf::expected<std::string> {
      ucp_listener_params_t params{};
      params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
      params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
      params.sockaddr.addrlen = sizeof(sa);
      params.conn_handler.cb = &ucx_core::on_conn_request;
      params.conn_handler.arg = this;
      ucp_listener_h listener = nullptr;
      auto st = ucp_listener_create(worker_, &params, &listener);
      if (st == UCS_ERR_BUSY)
        return ucx_error(transport_errc::address_in_use, "listen on " + address, st);
      if (st != UCS_OK)
        return ucx_error(transport_errc::peer_unreachable, "listen on " + address, st);
      ucp_listener_attr_t attr{};
      attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
      st = ucp_listener_query(listener, &attr);
      if (st != UCS_OK) {
        ucp_listener_destroy(listener);
        return ucx_error(transport_errc::peer_unreachable, "query listener", st);
      }
      listeners_.push_back(listener);
      auto bound = to_string(attr.sockaddr);
      auto host = address.substr(0, address.rfind(':'));
      auto port = bound.substr(bound.rfind(':') + 1);
      return host + ":" + port;
    });
  }

  caf::expected<peer_id> connect(const std::string& address) {
    sockaddr_in sa{};
    if (!parse_address(address, sa))
      return make_transport_error(transport_errc::invalid_message,
                                  "ucx: connect address '" + address + "' is not host:port");
    auto prom = std::make_shared<std::promise<caf::expected<peer_id>>>();
    auto fut = prom->get_future();
    auto id = next_peer_.fetch_add(1);
    if (!post([this, sa, address, prom, id] { start_connect(id, sa, address, prom); }))
      return closed_error();
    if (fut.wait_for(opts_.peer_timeout) == std::future_status::ready)
      return fut.get();
    // Timed out: fail the attempt on the progress thread (it answers the
    // promise, unless the answer raced us; either way we report timeout).
    post([this, id] {
      fail_peer(id, make_transport_error(transport_errc::timeout, "ucx: connect timed out"), true);
    });
    return make_transport_error(transport_errc::timeout,
                                "ucx: connect to " + address + " timed out after "
                                  + std::to_string(opts_.peer_timeout.count()) + " ms");
  }

  caf::expected<region_id> register_region(std::span<std::byte> memory) {
    if (memory.empty())
      return make_transport_error(transport_errc::invalid_message, "ucx: empty region");
    return call<region_id>([this, memory]() -> caf::expected<region_id> {
      ucp_mem_map_params_t mp{};
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
      mp.address = memory.data();
      mp.length = memory.size();
      ucp_mem_h memh = nullptr;
      auto st = ucp_mem_map(context_, &mp, &memh);
      if (st != UCS_OK)
        return ucx_error(transport_errc::invalid_message, "ucp_mem_map", st);
      void* rkey_buf = nullptr;
      size_t rkey_len = 0;
      st = ucp_rkey_pack(context_, memh, &rkey_buf, &rkey_len);
      if (st != UCS_OK) {
        ucp_mem_unmap(context_, memh);
        return ucx_error(transport_errc::invalid_message, "ucp_rkey_pack", st);
      }
      local_region r;
      r.id = next_region_++;
      r.memory = memory;
      r.memh = memh;
      auto* rb = static_cast<const std::byte*>(rkey_buf);
      r.rkey.assign(rb, rb + rkey_len);
      ucp_rkey_buffer_release(rkey_buf);
      regions_.emplace(r.id, r);
      writer w;
      encode_region(w, regions_.at(r.id));
      for (auto& [pid, p] : peers_)
        if (p.state != peer_state::failed)
          am_send(p, am_region, {}, w.out, {});
      return r.id;
    });
  }

  void send(peer_id to, message msg, completion done) {
    if (msg.actor.size() > max_actor_bytes || msg.frame.size() > opts_.max_message_bytes) {
      auto err = make_transport_error(transport_errc::message_too_large,
                                      "ucx: message of " + std::to_string(msg.frame.size())
                                        + " bytes for actor of " + std::to_string(msg.actor.size())
                                        + " bytes is too large");
      if (!post([done, err] { if (done) done(err); }) && done)
        done(closed_error());
      return;
    }
    auto m = std::make_shared<message>(std::move(msg));
    if (!post([this, to, m, done] {
          auto* p = usable_peer(to, done);
          if (!p)
            return;
          std::vector<std::byte> header(m->actor.size());
          std::memcpy(header.data(), m->actor.data(), m->actor.size());
          am_send(*p, am_message, std::move(header), std::move(m->frame), done);
        }))
      if (done)
        done(closed_error());
  }

  void transfer(peer_id to, transfer_batch batch, completion done) {
    auto b = std::make_shared<transfer_batch>(std::move(batch));
    if (!post([this, to, b, done] { start_transfer(to, b, done); }))
      if (done)
        done(closed_error());
  }

  void disconnect(peer_id peer) {
    post([this, peer] {
      auto it = peers_.find(peer);
      if (it == peers_.end() || it->second.state == peer_state::failed)
        return;
      am_send(it->second, am_bye, {}, {}, {});
      fail_peer(peer, make_transport_error(transport_errc::closed, "ucx: disconnected"), false);
    });
  }

private:
  enum class peer_state { connecting, connected, failed };

  struct local_region {
    region_id id = 0;
    std::span<std::byte> memory;
    ucp_mem_h memh = nullptr;
    std::vector<std::byte> rkey;
  };

  struct remote_region {
    uint64_t base = 0;
    uint64_t size = 0;
    ucp_rkey_h rkey = nullptr;
  };

  /// An operation UCX has not finished yet (user_data of its requests).
  struct pending_op {
    ucx_core* self = nullptr;
    peer_id peer = 0;
    completion done;
    std::vector<std::byte> header, data; // kept alive for the send
    std::shared_ptr<transfer_batch> batch;
    int outstanding = 0;                 // requests not yet completed
    ucs_status_t status = UCS_OK;        // first failure
    bool finished = false;
    bool flushing = false;               // transfer: waiting for flush
  };

  struct peer {
    peer_id id = 0;
    ucp_ep_h ep = nullptr;
    peer_state state = peer_state::connecting;
    bool accepted = false; // from our listener
    std::string address;
    std::map<region_id, remote_region> regions;
    caf::error why;
    std::shared_ptr<std::promise<caf::expected<peer_id>>> connect_promise;
  };

  // --- command queue ---
  bool post(std::function<void()> fn) {
    {
      std::lock_guard lock{mu_};
      if (stopping_)
        return false;
      commands_.push_back(std::move(fn));
    }
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
    return true;
  }

  template <class T>
  caf::expected<T> call(std::function<caf::expected<T>()> fn) {
    auto prom = std::make_shared<std::promise<caf::expected<T>>>();
    auto fut = prom->get_future();
    if (!post([prom, fn] { prom->set_value(fn()); }))
      return closed_error();
    return fut.get();
  }

  [[nodiscard]] caf::error init_ucx() {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
    // UCX_* environment variables apply first; ucx_options::tls overrides
    // UCX_TLS for this context only.
    ucp_config_t* config = nullptr;
    auto st = ucp_config_read(nullptr, nullptr, &config);
    if (st != UCS_OK)
      return ucx_error(transport_errc::unavailable, "ucx: ucp_config_read", st);
    if (!ucx_.tls.empty()) {
      st = ucp_config_modify(config, "TLS", ucx_.tls.c_str());
      if (st != UCS_OK) {
        ucp_config_release(config);
        return ucx_error(transport_errc::unavailable, "ucx: transport list '" + ucx_.tls + "'", st);
      }
    }
    st = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (st != UCS_OK)
      return ucx_error(transport_errc::unavailable, "ucx: ucp_init", st);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(context_, &wp, &worker_);
    if (st != UCS_OK) {
      ucp_cleanup(context_);
      return ucx_error(transport_errc::unavailable, "ucx: ucp_worker_create", st);
    }
    st = ucp_worker_get_efd(worker_, &worker_fd_);
    if (st != UCS_OK) {
      ucp_worker_destroy(worker_);
      ucp_cleanup(context_);
      return ucx_error(transport_errc::unavailable, "ucx: ucp_worker_get_efd", st);
    }
    for (unsigned id : {am_hello, am_hello_ack, am_message, am_region, am_batch, am_bye}) {
      ucp_am_handler_param_t hp{};
      hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB
                      | UCP_AM_HANDLER_PARAM_FIELD_ARG;
      hp.id = id;
      hp.cb = id == am_hello       ? &ucx_core::on_am_id<am_hello>
              : id == am_hello_ack ? &ucx_core::on_am_id<am_hello_ack>
              : id == am_message   ? &ucx_core::on_am_id<am_message>
              : id == am_region    ? &ucx_core::on_am_id<am_region>
              : id == am_batch     ? &ucx_core::on_am_id<am_batch>
                                   : &ucx_core::on_am_id<am_bye>;
      hp.arg = this;
      st = ucp_worker_set_am_recv_handler(worker_, &hp);
      if (st != UCS_OK) {
        ucp_worker_destroy(worker_);
        ucp_cleanup(context_);
        return ucx_error(transport_errc::unavailable, "ucx: set AM handler", st);
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

  bool run_commands() {
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard lock{mu_};
      batch.swap(commands_);
    }
    for (auto& fn : batch)
      fn();
    return !batch.empty();
  }

  void run() {
    while (!done_) {
      bool did = run_commands();
      while (ucp_worker_progress(worker_) != 0)
        did = true;
      reap_close_requests();
      if (did || done_)
        continue;
      {
        std::lock_guard lock{mu_};
        if (!commands_.empty())
          continue;
      }
      auto st = ucp_worker_arm(worker_);
      if (st == UCS_ERR_BUSY)
        continue;
      pollfd fds[2] = {{worker_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      ::poll(fds, 2, 50);
      uint64_t v = 0;
      [[maybe_unused]] auto n = ::read(wake_fd_, &v, sizeof(v));
    }
  }

  void reap_close_requests() {
    for (auto it = close_requests_.begin(); it != close_requests_.end();) {
      if (ucp_request_check_status(*it) != UCS_INPROGRESS) {
        ucp_request_free(*it);
        it = close_requests_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void shutdown() {
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
    for (auto* l : listeners_)
      ucp_listener_destroy(l);
    listeners_.clear();
    // Let the BYEs and graceful closes finish, bounded by peer_timeout.
    auto deadline = std::chrono::steady_clock::now() + opts_.peer_timeout;
    while (!close_requests_.empty() && std::chrono::steady_clock::now() < deadline) {
      ucp_worker_progress(worker_);
      reap_close_requests();
    }
    for (auto* r : close_requests_) {
      ucp_request_cancel(worker_, r);
    }
    while (ucp_worker_progress(worker_) != 0) {
    }
    reap_close_requests();
    for (auto& [id, r] : regions_)
      ucp_mem_unmap(context_, r.memh);
    regions_.clear();
    // Anything UCX did not complete: fail it now (no UCX call touches it later).
    for (auto* op : ops_) {
      if (!op->finished && op->done)
        op->done(closed_error());
      op->finished = true;
    }
    done_ = true;
  }

  // --- peers ---
  peer* usable_peer(peer_id to, const completion& done) {
    auto it = peers_.find(to);
    if (it == peers_.end()) {
      if (done)
        done(make_transport_error(transport_errc::not_connected,
                                  "ucx: no peer " + std::to_string(to)));
      return nullptr;
    }
    if (it->second.state != peer_state::connected) {
      if (done)
        done(it->second.state == peer_state::failed
               ? make_transport_error(transport_errc::peer_failed,
                                      "ucx: peer " + std::to_string(to) + " failed: "
                                        + caf::to_string(it->second.why))
               : make_transport_error(transport_errc::not_connected,
                                      "ucx: peer " + std::to_string(to) + " still connecting"));
      return nullptr;
    }
    return &it->second;
  }

  peer* peer_of(ucp_ep_h ep) {
    auto it = ep_to_peer_.find(ep);
    if (it == ep_to_peer_.end())
      return nullptr;
    auto p = peers_.find(it->second);
    return p == peers_.end() ? nullptr : &p->second;
  }

  ucp_ep_params_t ep_params() {
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.err_mode = ucx_.peer_error_handling ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    if (ucx_.peer_error_handling) {
      ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.err_handler.cb = &ucx_core::on_ep_error;
      ep.err_handler.arg = this;
    }
    return ep;
  }

  void start_connect(peer_id id, sockaddr_in sa, const std::string& address,
                     std::shared_ptr<std::promise<caf::expected<peer_id>>> prom) {
    auto params = ep_params();
    params.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
    params.sockaddr.addrlen = sizeof(sa);
    ucp_ep_h ep = nullptr;
    auto st = ucp_ep_create(worker_, &params, &ep);
    if (st != UCS_OK) {
      prom->set_value(ucx_error(transport_errc::peer_unreachable, "connect to " + address, st));
      return;
    }
    auto& p = peers_[id];
    p.id = id;
    p.ep = ep;
    p.address = address;
    p.connect_promise = std::move(prom);
    ep_to_peer_[ep] = id;
    writer w;
    encode_regions(w);
    am_send(p, am_hello, {}, std::move(w.out), {});
  }

  static void on_conn_request(ucp_conn_request_h req, void* arg) {
    auto* self = static_cast<ucx_core*>(arg);
    if (self->shutting_down_ || self->listeners_.empty())
      return; // listeners are being destroyed; the client times out
    ucp_conn_request_attr_t attr{};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    std::string address = "ucx-peer";
    if (ucp_conn_request_query(req, &attr) == UCS_OK)
      address = to_string(attr.client_address);
    auto params = self->ep_params();
    params.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
    params.conn_request = req;
    ucp_ep_h ep = nullptr;
    if (ucp_ep_create(self->worker_, &params, &ep) != UCS_OK)
      return;
    auto id = self->next_peer_.fetch_add(1);
    auto& p = self->peers_[id];
    p.id = id;
    p.ep = ep;
    p.accepted = true;
    p.address = address;
    self->ep_to_peer_[ep] = id;
  }

  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* self = static_cast<ucx_core*>(arg);
    auto* p = self->peer_of(ep);
    if (!p || p->state == peer_state::failed)
      return;
    auto id = p->id;
    auto err = p->state == peer_state::connecting && !p->accepted
                 ? ucx_error(transport_errc::peer_unreachable, "connect to " + p->address, status)
                 : ucx_error(transport_errc::peer_failed, "peer " + std::to_string(id), status);
    // Close (force) outside the callback.
    self->post([self, id, err] { self->fail_peer(id, err, true); });
  }

  /// Marks `id` failed (once): answers a pending connect, reports
  /// on_peer_failed (for connected peers), destroys its rkeys and closes the
  /// endpoint (forced, or flushing so a queued BYE still leaves).
  void fail_peer(peer_id id, const caf::error& why, bool force) {
    auto it = peers_.find(id);
    if (it == peers_.end() || it->second.state == peer_state::failed)
      return;
    auto& p = it->second;
    auto was = p.state;
    p.state = peer_state::failed;
    p.why = why;
    if (p.connect_promise) {
      p.connect_promise->set_value(why);
      p.connect_promise.reset();
    }
    for (auto& [rid, r] : p.regions)
      ucp_rkey_destroy(r.rkey);
    p.regions.clear();
    if (p.ep) {
      ucp_request_param_t rp{};
      rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      rp.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      auto* req = ucp_ep_close_nbx(p.ep, &rp);
      if (UCS_PTR_IS_PTR(req))
        close_requests_.push_back(req);
      ep_to_peer_.erase(p.ep);
      p.ep = nullptr;
    }
    // UCX completes the peer's outstanding requests with an error as the
    // endpoint closes; anything it still holds is failed here.
    for (auto* op : ops_)
      if (op->peer == id && !op->finished) {
        op->finished = true;
        if (op->done)
          op->done(why);
      }
    if (was == peer_state::connected && !shutting_down_)
      if (auto* h = handler_.load())
        h->on_peer_failed(id, why);
  }

  // --- regions ---
  static void encode_region(writer& w, const local_region& r) {
    w.put<uint32_t>(r.id);
    w.put<uint64_t>(reinterpret_cast<uintptr_t>(r.memory.data()));
    w.put<uint64_t>(r.memory.size());
    w.put<uint32_t>(static_cast<uint32_t>(r.rkey.size()));
    w.bytes(r.rkey.data(), r.rkey.size());
  }

  void encode_regions(writer& w) {
    w.put<uint32_t>(static_cast<uint32_t>(regions_.size()));
    for (auto& [id, r] : regions_)
      encode_region(w, r);
  }

  bool decode_region(peer& p, reader& rd) {
    auto id = rd.get<uint32_t>();
    auto base = rd.get<uint64_t>();
    auto size = rd.get<uint64_t>();
    auto len = rd.get<uint32_t>();
    auto* buf = rd.take(len);
    if (!rd.ok || !p.ep)
      return false;
    ucp_rkey_h rkey = nullptr;
    if (ucp_ep_rkey_unpack(p.ep, buf, &rkey) != UCS_OK)
      return false;
    auto old = p.regions.find(id);
    if (old != p.regions.end())
      ucp_rkey_destroy(old->second.rkey);
    p.regions[id] = remote_region{base, size, rkey};
    return true;
  }

  void decode_regions(peer& p, reader& rd) {
    auto n = rd.get<uint32_t>();
    for (uint32_t i = 0; i < n && rd.ok; ++i)
      decode_region(p, rd);
  }

  // --- sending ---
  pending_op* new_op(peer_id peer, completion done) {
    auto* op = new pending_op;
    op->self = this;
    op->peer = peer;
    op->done = std::move(done);
    ops_.push_back(op);
    return op;
  }

  void finish_op(pending_op* op, const caf::error& err) {
    if (!op->finished) {
      op->finished = true;
      if (op->done)
        op->done(err);
    }
  }

  void release_op(pending_op* op) {
    if (op->outstanding > 0)
      return;
    std::erase(ops_, op);
    delete op;
  }

  caf::error status_error(const pending_op* op, ucs_status_t st) {
    auto it = peers_.find(op->peer);
    if (it != peers_.end() && it->second.state == peer_state::failed)
      return make_transport_error(transport_errc::peer_failed,
                                  "ucx: peer failed: " + caf::to_string(it->second.why));
    return ucx_error(transport_errc::peer_failed, "peer " + std::to_string(op->peer), st);
  }

  static void on_send_done(void* request, ucs_status_t status, void* user_data) {
    auto* op = static_cast<pending_op*>(user_data);
    ucp_request_free(request);
    --op->outstanding;
    auto* self = op->self;
    if (status != UCS_OK)
      self->finish_op(op, self->status_error(op, status));
    else
      self->finish_op(op, caf::error{});
    self->release_op(op);
  }

  /// Sends an active message on `p`; `done` (may be empty) gets the result.
  void am_send(peer& p, unsigned id, std::vector<std::byte> header, std::vector<std::byte> data,
               completion done) {
    auto* op = new_op(p.id, std::move(done));
    op->header = std::move(header);
    op->data = std::move(data);
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA
                      | UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
    rp.cb.send = &ucx_core::on_send_done;
    rp.user_data = op;
    auto* req = ucp_am_send_nbx(p.ep, id, op->header.data(), op->header.size(), op->data.data(),
                                op->data.size(), &rp);
    if (req == nullptr) {
      finish_op(op, caf::error{});
      release_op(op);
    } else if (UCS_PTR_IS_ERR(req)) {
      finish_op(op, status_error(op, UCS_PTR_STATUS(req)));
      release_op(op);
    } else {
      ++op->outstanding;
    }
  }

  // --- transfers ---
  static void on_put_done(void* request, ucs_status_t status, void* user_data) {
    auto* op = static_cast<pending_op*>(user_data);
    ucp_request_free(request);
    --op->outstanding;
    if (status != UCS_OK && op->status == UCS_OK)
      op->status = status;
    op->self->release_op(op);
  }

  static void on_flush_done(void* request, ucs_status_t status, void* user_data) {
    auto* op = static_cast<pending_op*>(user_data);
    ucp_request_free(request);
    --op->outstanding;
    if (status != UCS_OK && op->status == UCS_OK)
      op->status = status;
    op->self->after_flush(op);
  }

  void start_transfer(peer_id to, const std::shared_ptr<transfer_batch>& b, const completion& done) {
    auto* p = usable_peer(to, done);
    if (!p)
      return;
    for (size_t i = 0; i < b->blocks.size(); ++i) {
      const auto& blk = b->blocks[i];
      auto bad = [&](const std::string& why) {
        if (done)
          done(make_transport_error(transport_errc::invalid_message,
                                    "ucx: batch " + std::to_string(b->batch_id) + " block "
                                      + std::to_string(i) + ": " + why));
      };
      auto src = regions_.find(blk.src);
      if (src == regions_.end())
        return bad("unknown local region " + std::to_string(blk.src));
      auto dst = p->regions.find(blk.dst);
      if (dst == p->regions.end())
        return bad("unknown peer region " + std::to_string(blk.dst));
      if (blk.size == 0)
        return bad("empty block");
      auto range = [&](uint64_t off) {
        return "[" + std::to_string(off) + ", " + std::to_string(off + blk.size) + ")";
      };
      if (blk.src_offset > src->second.memory.size()
          || blk.size > src->second.memory.size() - blk.src_offset)
        return bad("source range " + range(blk.src_offset) + " outside local region "
                   + std::to_string(blk.src) + " of "
                   + std::to_string(src->second.memory.size()) + " bytes");
      if (blk.dst_offset > dst->second.size || blk.size > dst->second.size - blk.dst_offset)
        return bad("destination range " + range(blk.dst_offset) + " outside peer region "
                   + std::to_string(blk.dst) + " of " + std::to_string(dst->second.size)
                   + " bytes");
    }
    auto* op = new_op(to, done);
    op->batch = b;
    ++op->outstanding; // held until the flush is issued
    for (const auto& blk : b->blocks) {
      auto& src = regions_.at(blk.src);
      auto& dst = p->regions.at(blk.dst);
      ucp_request_param_t rp{};
      rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA
                        | UCP_OP_ATTR_FIELD_MEMH;
      rp.cb.send = &ucx_core::on_put_done;
      rp.user_data = op;
      rp.memh = src.memh;
      auto* req = ucp_put_nbx(p->ep, src.memory.data() + blk.src_offset, blk.size,
                              dst.base + blk.dst_offset, dst.rkey, &rp);
      if (UCS_PTR_IS_ERR(req)) {
        op->status = UCS_PTR_STATUS(req);
        break;
      }
      if (req != nullptr)
        ++op->outstanding;
    }
    --op->outstanding;
    if (op->status != UCS_OK) {
      finish_op(op, status_error(op, op->status));
      release_op(op);
      return;
    }
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.send = &ucx_core::on_flush_done;
    rp.user_data = op;
    auto* req = ucp_ep_flush_nbx(p->ep, &rp);
    if (UCS_PTR_IS_ERR(req)) {
      op->status = UCS_PTR_STATUS(req);
      after_flush(op);
    } else if (req == nullptr) {
      after_flush(op);
    } else {
      ++op->outstanding;
    }
  }

  void after_flush(pending_op* op) {
    if (op->finished || op->status != UCS_OK) {
      finish_op(op, status_error(op, op->status));
      release_op(op);
      return;
    }
    auto it = peers_.find(op->peer);
    if (it == peers_.end() || it->second.state != peer_state::connected) {
      finish_op(op, status_error(op, UCS_ERR_CONNECTION_RESET));
      release_op(op);
      return;
    }
    writer w;
    w.put<uint64_t>(op->batch->batch_id);
    w.put<uint32_t>(static_cast<uint32_t>(op->batch->blocks.size()));
    for (const auto& blk : op->batch->blocks) {
      w.put<uint32_t>(blk.src);
      w.put<uint64_t>(blk.src_offset);
      w.put<uint32_t>(blk.dst);
      w.put<uint64_t>(blk.dst_offset);
      w.put<uint64_t>(blk.size);
    }
    auto done = std::move(op->done);
    op->finished = true;
    release_op(op);
    am_send(it->second, am_batch, {}, std::move(w.out), std::move(done));
  }

  // --- receiving ---
  struct rndv_recv {
    ucx_core* self;
    peer_id from;
    std::string actor;
    std::vector<std::byte> data;
  };

  static void on_rndv_done(void* request, ucs_status_t status, size_t, void* user_data) {
    auto* r = static_cast<rndv_recv*>(user_data);
    ucp_request_free(request);
    if (status == UCS_OK)
      r->self->deliver(r->from, std::move(r->actor), std::move(r->data));
    delete r;
  }

  void deliver(peer_id from, std::string actor, std::vector<std::byte> frame) {
    auto it = peers_.find(from);
    if (shutting_down_ || it == peers_.end() || it->second.state != peer_state::connected)
      return;
    if (auto* h = handler_.load())
      h->on_message(from, message{std::move(actor), std::move(frame)});
  }

public:
  template <unsigned Id>
  static ucs_status_t on_am_id(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param) {
    auto* self = static_cast<ucx_core*>(arg);
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) || self->shutting_down_)
      return UCS_OK;
    auto* p = self->peer_of(param->reply_ep);
    if (!p || p->state == peer_state::failed)
      return UCS_OK;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (rndv && Id != am_message)
      return UCS_OK; // control payloads are small; never rendezvous
    reader rd{static_cast<const std::byte*>(data), length};
    switch (Id) {
      case am_hello: {
        self->decode_regions(*p, rd);
        p->state = peer_state::connected;
        writer w;
        self->encode_regions(w);
        self->am_send(*p, am_hello_ack, {}, std::move(w.out), {});
        if (auto* h = self->handler_.load())
          h->on_peer_connected(p->id, p->address);
        break;
      }
      case am_hello_ack: {
        self->decode_regions(*p, rd);
        if (p->state == peer_state::connecting) {
          p->state = peer_state::connected;
          if (p->connect_promise) {
            p->connect_promise->set_value(p->id);
            p->connect_promise.reset();
          }
        }
        break;
      }
      case am_region:
        self->decode_region(*p, rd);
        break;
      case am_message: {
        std::string actor(static_cast<const char*>(header), header_length);
        if (rndv) {
          auto* r = new rndv_recv{self, p->id, std::move(actor), std::vector<std::byte>(length)};
          ucp_request_param_t rp{};
          rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
          rp.cb.recv_am = &ucx_core::on_rndv_done;
          rp.user_data = r;
          auto* req = ucp_am_recv_data_nbx(self->worker_, data, r->data.data(), length, &rp);
          if (req == nullptr) {
            self->deliver(r->from, std::move(r->actor), std::move(r->data));
            delete r;
          } else if (UCS_PTR_IS_ERR(req)) {
            delete r;
          }
          break;
        }
        auto* b = static_cast<const std::byte*>(data);
        self->deliver(p->id, std::move(actor), std::vector<std::byte>(b, b + length));
        break;
      }
      case am_batch: {
        transfer_batch batch;
        batch.batch_id = rd.get<uint64_t>();
        auto n = rd.get<uint32_t>();
        for (uint32_t i = 0; i < n && rd.ok; ++i) {
          block_copy c;
          c.src = rd.get<uint32_t>();
          c.src_offset = rd.get<uint64_t>();
          c.dst = rd.get<uint32_t>();
          c.dst_offset = rd.get<uint64_t>();
          c.size = rd.get<uint64_t>();
          batch.blocks.push_back(c);
        }
        if (rd.ok && p->state == peer_state::connected)
          if (auto* h = self->handler_.load())
            h->on_blocks_arrived(p->id, batch);
        break;
      }
      case am_bye: {
        auto id = p->id;
        self->post([self, id] {
          self->fail_peer(id, make_transport_error(transport_errc::closed,
                                                   "ucx: peer closed the connection"),
                          true);
        });
        break;
      }
      default:
        break;
    }
    return UCS_OK;
  }

private:
  transport_options opts_;
  ucx_options ucx_;
  capabilities caps_;
  std::atomic<transport_handler*> handler_{nullptr};
  std::atomic<peer_id> next_peer_{1};

  std::mutex mu_;
  std::vector<std::function<void()>> commands_; // guarded by mu_
  bool stopping_ = false;                       // guarded by mu_
  int wake_fd_ = -1;
  std::thread thread_;
  bool started_ = false;

  // --- progress-thread state ---
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int worker_fd_ = -1;
  std::vector<ucp_listener_h> listeners_;
  std::map<peer_id, peer> peers_;
  std::unordered_map<ucp_ep_h, peer_id> ep_to_peer_;
  std::map<region_id, local_region> regions_;
  region_id next_region_ = 1;
  std::vector<pending_op*> ops_;
  std::vector<void*> close_requests_;
  bool shutting_down_ = false;
  bool done_ = false;

};

} // namespace detail

ucx_transport::ucx_transport(std::unique_ptr<detail::ucx_core> core) : core_(std::move(core)) {}

caf::expected<std::unique_ptr<ucx_transport>> ucx_transport::make(transport_options options,
                                                                 ucx_options ucx) {
  auto core = std::make_unique<detail::ucx_core>(options, ucx);
  if (auto err = core->start())
    return err;
  return std::unique_ptr<ucx_transport>{new ucx_transport{std::move(core)}};
}

ucx_transport::~ucx_transport() = default;

const capabilities& ucx_transport::caps() const {
  return core_->caps();
}

void ucx_transport::set_handler(transport_handler* handler) {
  core_->set_handler(handler);
}

caf::expected<std::string> ucx_transport::listen(const std::string& address) {
  return core_->listen(address);
}

caf::expected<peer_id> ucx_transport::connect(const std::string& address) {
  return core_->connect(address);
}

caf::expected<region_id> ucx_transport::register_region(std::span<std::byte> memory) {
  return core_->register_region(memory);
}

void ucx_transport::send(peer_id to, message msg, completion done) {
  core_->send(to, std::move(msg), std::move(done));
}

void ucx_transport::transfer(peer_id to, transfer_batch batch, completion done) {
  core_->transfer(to, std::move(batch), std::move(done));
}

void ucx_transport::disconnect(peer_id peer) {
  core_->disconnect(peer);
}

} // namespace tessera::transport
