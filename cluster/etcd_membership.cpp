#include "cluster/etcd_membership.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <caf/sec.hpp>
#include <spdlog/spdlog.h>

#include "cluster/nearest_name.hpp"
#include "common/error.hpp"

namespace tessera::cluster {

namespace {

using clock_type = std::chrono::steady_clock;

/// A known member: its entry as read and its text (to tell a change).
struct member {
  node_spec spec;
  std::string text;
};

} // namespace

class etcd_membership::impl {
public:
  impl(membership_options o, membership_events e)
      : opts(std::move(o)), events(std::move(e)), key(opts.prefix + opts.self.id),
        entry(node_entry_text(opts.self)) {}

  ~impl() { stop(); }

  void stop() {
    {
      std::lock_guard lock{mu};
      if (stopping)
        return;
      stopping = true;
    }
    wake.notify_all();
    if (keeper.joinable())
      keeper.join();
    if (watcher.joinable())
      watcher.join();
    if (lease != 0) {
      etcd_client c{opts.etcd};
      if (auto err = c.revoke_lease(lease))
        spdlog::warn("membership: could not revoke lease {:x} of '{}' ({}); it lapses within {} s", lease,
                     opts.self.id, error_text(err), opts.ttl_s);
      else
        spdlog::info("membership: '{}' left {}", opts.self.id, opts.prefix);
    }
  }

  /// Sleeps `d` unless stopping; false when stopping.
  bool sleep(std::chrono::milliseconds d) {
    std::unique_lock lock{mu};
    wake.wait_for(lock, d, [this] { return stopping || reput; });
    return !stopping;
  }

  /// Our own key was deleted or overwritten (by hand, or a forged
  /// entry): the keeper puts it back at once.
  void self_changed() {
    {
      std::lock_guard lock{mu};
      reput = true;
    }
    wake.notify_all();
  }

  [[nodiscard]] bool stopped() {
    std::lock_guard lock{mu};
    return stopping;
  }

  /// A fresh lease and our key on it, unless another node holds our id:
  /// the key is put only where there is none (one transaction). An entry
  /// at our own address is this node's previous process (it died before
  /// its lease lapsed; we listen on that address now, so it is gone): we
  /// take it over. Errors: etcd's, or the id is taken by a node elsewhere.
  caf::error register_self(etcd_client& c) {
    auto l = c.grant_lease(opts.ttl_s);
    if (!l)
      return l.error();
    auto held = c.put_if_absent(key, entry, *l);
    caf::error err = held ? caf::error{} : held.error();
    if (held && *held) {
      auto other = read_node_entry((*held)->value, "etcd key " + quote_input(key));
      if (other && other->address == opts.self.address) {
        spdlog::info("membership: '{}' takes over its entry from its previous process (same address {})",
                     opts.self.id, opts.self.address);
        err = c.put(key, entry, *l);
      } else {
        err = caf::make_error(
          caf::sec::invalid_argument,
          "node id " + quote_input(opts.self.id) + " is already registered in etcd (" + key + ") by " +
            (other ? "a node at " + quote_input(other->address) : std::string{"an entry this node cannot read"}) +
            (((*held)->lease != 0) ? " whose lease is live" : " with no lease") +
            ": two nodes cannot share an id. Stop that node, or start this one with another id (a node that "
            "died frees its id within membership_ttl_s = " +
            std::to_string(opts.ttl_s) + " s)");
      }
    }
    if (err) {
      (void)c.revoke_lease(*l);
      return err;
    }
    lease = *l;
    return {};
  }

  void keep_alive_loop() {
    etcd_client c{opts.etcd};
    const auto period = std::chrono::milliseconds{opts.ttl_s * 1000 / 3};
    auto backoff = opts.backoff_min;
    bool failing = false;
    auto next = period;
    while (sleep(next)) {
      caf::error err;
      bool again = false;
      {
        std::lock_guard lock{mu};
        std::swap(again, reput);
      }
      if (again && lease != 0) {
        spdlog::warn("membership: the key of '{}' was deleted or changed in etcd; putting it back", opts.self.id);
        err = c.put(key, entry, lease);
      } else if (lease == 0) {
        err = register_self(c);
      } else if (auto ttl = c.keep_alive(lease); !ttl) {
        err = ttl.error();
      } else if (*ttl == 0) {
        // It lapsed (etcd was away longer than the TTL, or this process
        // stood still): peers dropped us; put ourselves back.
        spdlog::warn("membership: the lease of '{}' lapsed; registering again", opts.self.id);
        lease = 0;
        err = register_self(c);
      }
      if (err) {
        if (!failing)
          spdlog::warn("membership: renewing '{}' in etcd failed ({}); retrying", opts.self.id, error_text(err));
        failing = true;
        next = std::min(backoff, period);
        backoff = std::min(backoff * 2, opts.backoff_max);
        continue;
      }
      if (failing)
        spdlog::info("membership: '{}' is registered in etcd again", opts.self.id);
      failing = false;
      backoff = opts.backoff_min;
      next = period;
    }
  }

  /// The entry under `kv`, or null when it is not one (logged once per
  /// key and revision).
  std::optional<member> read_entry(const etcd_kv& kv) {
    const std::string id = kv.key.substr(opts.prefix.size());
    auto spec = read_node_entry(kv.value, "etcd key " + quote_input(kv.key));
    std::string why;
    if (!spec)
      why = error_message(spec.error());
    else if (spec->id != id)
      why = "its id " + quote_input(spec->id) + " is not its key's " + quote_input(id);
    if (why.empty())
      return member{std::move(*spec), kv.value};
    if (refused.insert(kv.key + "@" + std::to_string(kv.mod_revision)).second)
      spdlog::warn("membership: ignoring etcd key {}: {}", quote_input(kv.key), why);
    return std::nullopt;
  }

  void set_member(const std::string& id, std::optional<member> m) {
    if (id == opts.self.id) {
      if (!m || m->text != entry)
        self_changed();
      return;
    }
    std::unique_lock lock{mu};
    auto it = known.find(id);
    if (!m) {
      if (it == known.end())
        return;
      known.erase(it);
      lock.unlock();
      spdlog::info("membership: node '{}' left", id);
      if (events.left)
        events.left(id);
      return;
    }
    if (it != known.end() && it->second.text == m->text)
      return;
    const node_spec spec = m->spec;
    known[id] = std::move(*m);
    lock.unlock();
    spdlog::info("membership: node '{}' at {} joined", id, spec.address);
    if (events.joined)
      events.joined(spec);
  }

  /// Reads the prefix and turns its difference from what is known into
  /// events; the revision to watch from.
  caf::expected<int64_t> resync(etcd_client& c) {
    auto r = c.range_prefix(opts.prefix, opts.max_members + 1);
    if (!r)
      return r.error();
    if (r->more || static_cast<int64_t>(r->kvs.size()) > opts.max_members)
      spdlog::warn("membership: more than {} keys under {}; the rest are ignored", opts.max_members, opts.prefix);
    std::map<std::string, member> now;
    for (const auto& kv : r->kvs) {
      if (static_cast<int64_t>(now.size()) >= opts.max_members)
        break;
      if (auto m = read_entry(kv))
        now.emplace(kv.key.substr(opts.prefix.size()), std::move(*m));
    }
    if (!now.contains(opts.self.id))
      self_changed();
    std::vector<std::string> gone;
    {
      std::lock_guard lock{mu};
      for (const auto& [id, _] : known)
        if (!now.contains(id))
          gone.push_back(id);
    }
    for (const auto& id : gone)
      set_member(id, std::nullopt);
    for (auto& [id, m] : now)
      set_member(id, std::move(m));
    return r->revision;
  }

  void watch_loop() {
    etcd_client c{opts.etcd};
    auto backoff = opts.backoff_min;
    while (!stopped()) {
      auto rev = resync(c);
      std::unique_ptr<etcd_watch> w;
      caf::error err;
      if (!rev) {
        err = rev.error();
      } else if (auto opened = etcd_watch::open(opts.etcd, opts.prefix, *rev + 1); !opened) {
        err = opened.error();
      } else {
        w = std::move(*opened);
        backoff = opts.backoff_min;
      }
      while (w && !stopped()) {
        auto evs = w->next(std::chrono::milliseconds{250});
        if (!evs) {
          err = evs.error();
          break;
        }
        for (const auto& ev : *evs) {
          if (!ev.kv.key.starts_with(opts.prefix) || ev.kv.key.size() == opts.prefix.size())
            continue;
          const std::string id = ev.kv.key.substr(opts.prefix.size());
          set_member(id, ev.type == etcd_event::kind::del ? std::nullopt : read_entry(ev.kv));
        }
      }
      if (stopped())
        return;
      spdlog::warn("membership: watching {} in etcd: {}; again in {} ms", opts.prefix, error_text(err),
                   backoff.count());
      if (!sleep(backoff))
        return;
      backoff = std::min(backoff * 2, opts.backoff_max);
    }
  }

  membership_options opts;
  membership_events events;
  const std::string key;
  const std::string entry;
  /// The keeper's lease (0: none); read by stop() after the keeper joined.
  int64_t lease = 0;
  mutable std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;
  bool reput = false; // guarded by mu
  std::map<std::string, member> known; // guarded by mu
  std::set<std::string> refused;       // watch thread only
  std::thread keeper;
  std::thread watcher;
};

etcd_membership::etcd_membership(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

etcd_membership::~etcd_membership() = default;

caf::expected<std::unique_ptr<etcd_membership>> etcd_membership::start(membership_options o,
                                                                       membership_events events) {
  auto p = std::make_unique<impl>(std::move(o), std::move(events));
  {
    etcd_client c{p->opts.etcd};
    if (auto err = p->register_self(c))
      return err;
  }
  spdlog::info("membership: '{}' registered as {} (lease {:x}, {} s)", p->opts.self.id, p->key, p->lease,
               p->opts.ttl_s);
  auto* raw = p.get();
  p->keeper = std::thread{[raw] { raw->keep_alive_loop(); }};
  p->watcher = std::thread{[raw] { raw->watch_loop(); }};
  return std::unique_ptr<etcd_membership>(new etcd_membership(std::move(p)));
}

std::vector<node_spec> etcd_membership::members() const {
  std::lock_guard lock{impl_->mu};
  std::vector<node_spec> out;
  for (const auto& [_, m] : impl_->known)
    out.push_back(m.spec);
  return out;
}

} // namespace tessera::cluster
