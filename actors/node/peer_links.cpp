#include "actors/node/peer_links.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "cluster/etcd_membership.hpp"
#include "common/error.hpp"

namespace tessera::actors::detail {

namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::chrono::milliseconds tick{200};
constexpr std::chrono::milliseconds backoff_max{1000};

/// Keeps the bridge connected to a set of nodes that may change at any
/// time; one thread.
class dialler {
public:
  dialler(caf::actor_system& sys, bridge_actor br) : sys_(sys), br_(std::move(br)) {
    thread_ = std::thread{[this] { run(); }};
  }

  ~dialler() {
    {
      std::lock_guard lock{mu_};
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  /// Keeps `id` at `address` connected (a new address replaces the old).
  void add(const std::string& id, const std::string& address) {
    {
      std::lock_guard lock{mu_};
      auto& t = targets_[id];
      if (t.address != address)
        t = target{address};
    }
    cv_.notify_all();
  }

  void remove(const std::string& id) {
    std::lock_guard lock{mu_};
    targets_.erase(id);
  }

private:
  struct target {
    std::string address;
    clock_type::time_point next_try{};
    std::chrono::milliseconds backoff{tick};
    bool connected_once = false;
    bool logged = false;
  };

  void run() {
    caf::scoped_actor self{sys_};
    std::unique_lock lock{mu_};
    while (!stopping_) {
      lock.unlock();
      std::vector<std::string> peers;
      self->request(br_, std::chrono::seconds{5}, peers_atom_v)
        .receive([&](std::vector<std::string>& p) { peers = std::move(p); }, [](caf::error&) {});
      lock.lock();
      const auto now = clock_type::now();
      std::vector<std::pair<std::string, std::string>> due;
      for (auto& [id, t] : targets_)
        if (!std::binary_search(peers.begin(), peers.end(), id) && now >= t.next_try)
          due.emplace_back(id, t.address);
      for (const auto& [id, address] : due) {
        if (stopping_)
          break;
        lock.unlock();
        caf::error err;
        self->request(br_, std::chrono::seconds{10}, connect_atom_v, id, address)
          .receive([] {}, [&](caf::error& e) { err = e; });
        lock.lock();
        auto it = targets_.find(id);
        if (it == targets_.end() || it->second.address != address)
          continue; // removed or moved meanwhile
        auto& t = it->second;
        if (!err) {
          spdlog::info("node: {} node '{}' at {}", t.connected_once ? "connected again to" : "connected to", id,
                       address);
          t.connected_once = true;
          t.logged = false;
          t.backoff = tick;
          continue;
        }
        if (!t.logged)
          spdlog::info("node: waiting for node '{}' at {} ({})", id, address, error_text(err));
        t.logged = true;
        t.next_try = clock_type::now() + t.backoff;
        t.backoff = std::min(t.backoff * 2, backoff_max);
      }
      cv_.wait_for(lock, tick, [this] { return stopping_; });
    }
  }

  caf::actor_system& sys_;
  bridge_actor br_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                   // guarded by mu_
  std::map<std::string, target> targets_;   // guarded by mu_
  std::thread thread_;
};

} // namespace

class peer_links::impl {
public:
  impl(caf::actor_system& sys, const bridge_actor& br, router_local_actor router, std::string self_id)
      : sys(sys), br(br), router(std::move(router)), self_id(std::move(self_id)), dial(sys, br) {}

  ~impl() {
    membership.reset(); // revokes the lease; no event after this
  }

  void joined(const cluster::node_spec& n) {
    // One connection per pair: the node with the greater id dials.
    if (n.id < self_id)
      dial.add(n.id, n.address);
  }

  void left(const std::string& id) {
    dial.remove(id);
    caf::scoped_actor self{sys};
    bool was_connected = false;
    self->request(br, std::chrono::seconds{5}, disconnect_atom_v, id)
      .receive([&](bool c) { was_connected = c; }, [](caf::error&) {});
    // After the bridge's node_down: the router forgets what it had just
    // marked unhealthy, and a worker heartbeat already on its way cannot
    // bring the node back (the connection is gone).
    if (router)
      caf::anon_send(router, forget_atom_v, id);
    spdlog::warn("node: node '{}' left the cluster{}", id, was_connected ? " (disconnected)" : "");
  }

  caf::actor_system& sys;
  bridge_actor br;
  router_local_actor router;
  std::string self_id;
  dialler dial;
  std::unique_ptr<cluster::etcd_membership> membership;
};

peer_links::peer_links(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

peer_links::~peer_links() = default;

caf::expected<std::unique_ptr<peer_links>> peer_links::start(caf::actor_system& sys, const bridge_actor& br,
                                                             router_local_actor router,
                                                             const cluster::cluster_config& cfg,
                                                             const cluster::node_spec& me) {
  auto p = std::make_unique<impl>(sys, br, std::move(router), me.id);
  if (cfg.membership != "etcd") {
    for (const auto& n : cfg.nodes) {
      if (n.id == me.id)
        break;
      p->dial.add(n.id, n.address);
    }
    return std::unique_ptr<peer_links>(new peer_links(std::move(p)));
  }
  cluster::membership_options o;
  for (const auto& url : cfg.etcd_endpoints) {
    auto ep = cluster::parse_etcd_url(url);
    if (!ep)
      return ep.error();
    o.etcd.endpoints.push_back(std::move(*ep));
  }
  o.prefix = cfg.etcd_prefix;
  o.ttl_s = cfg.membership_ttl_s;
  o.self = me;
  auto* raw = p.get();
  cluster::membership_events events{[raw](const cluster::node_spec& n) { raw->joined(n); },
                                    [raw](const std::string& id) { raw->left(id); }};
  auto m = cluster::etcd_membership::start(std::move(o), std::move(events));
  if (!m)
    return m.error();
  p->membership = std::move(*m);
  return std::unique_ptr<peer_links>(new peer_links(std::move(p)));
}

} // namespace tessera::actors::detail
