#include "transport/loopback/loopback_transport.hpp"

#include <atomic>
#include <charconv>
#include <memory>
#include <optional>
#include <cstring>
#include <utility>
#include <vector>

#include "common/assert.hpp"
#include "transport/event_loop.hpp"

namespace tessera::transport {

namespace {

constexpr size_t max_actor_name_bytes = 64;

caf::error closed_error() {
  return make_transport_error(transport_errc::closed, "loopback: transport closed");
}

/// Splits "host:port"; nullopt when malformed.
std::optional<std::pair<std::string, uint32_t>> split_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    return std::nullopt;
  uint32_t port = 0;
  const char* first = address.data() + colon + 1;
  const char* last = address.data() + address.size();
  auto [ptr, ec] = std::from_chars(first, last, port);
  if (ec != std::errc{} || ptr != last || port > 65535)
    return std::nullopt;
  return std::pair{address.substr(0, colon), port};
}

/// True when [offset, offset + size) lies within `region_bytes` (no overflow).
bool in_bounds(uint64_t offset, uint64_t size, size_t region_bytes) {
  return offset <= region_bytes && size <= region_bytes - offset;
}

std::string range_text(uint64_t offset, uint64_t size) {
  // Appended piecewise: GCC 12 warns (-Wrestrict, a false positive) on
  // "literal" + std::string chains here.
  std::string out{"["};
  out += std::to_string(offset);
  out += ", ";
  out += std::to_string(offset);
  out += " + ";
  out += std::to_string(size);
  out += ")";
  return out;
}

} // namespace

namespace detail {

/// The shared state of one loopback_transport. Peers hold it (weakly in
/// links, strongly while delivering) so the object outlives its transport
/// only as long as a delivery in progress needs it; after shutdown every
/// delivery is refused.
class loopback_core {
public:
  loopback_core(std::shared_ptr<loopback_fabric> fabric, transport_options options)
    : fabric_(std::move(fabric)), options_(options) {
    caps_.backend = "loopback";
    caps_.rma = true;
    caps_.device_memory = false;
    caps_.max_message_bytes = options_.max_message_bytes;
  }

  struct link {
    std::weak_ptr<loopback_core> remote;
    /// The id the remote uses for us; 0 while connect() is completing.
    peer_id remote_id = 0;
    bool alive = true;
    /// The remote's transport_options::identity (in one process nothing
    /// needs proving).
    std::string identity;
  };

  std::shared_ptr<loopback_fabric> fabric_;
  transport_options options_;
  capabilities caps_;
  std::atomic<transport_handler*> handler_{nullptr};

  std::mutex mu_;
  std::map<peer_id, link> links_;               // guarded by mu_
  std::vector<std::span<std::byte>> regions_;   // guarded by mu_; id = index + 1
  /// allocate_region's memory (guarded by mu_).
  std::vector<std::unique_ptr<std::byte[]>> owned_;
  peer_id next_peer_ = 1;                       // guarded by mu_
  std::string address_;                         // guarded by mu_; first bound or client name
  bool dead_ = false;                           // guarded by mu_

  // Declared last: its thread stops (in ~event_loop) before the members
  // its tasks touch are destroyed.
  event_loop loop_;

  /// Queues `done(err)` here; inline with `closed` once stopped.
  void complete(const completion& done, caf::error err) {
    if (!done)
      return;
    auto run = [done, err = std::move(err)] { done(err); };
    auto cancel = [done] { done(closed_error()); };
    if (!loop_.post(std::move(run), std::move(cancel)))
      done(closed_error());
  }

  /// Posts a handler call; requires mu_ (so events keep the order in which
  /// link state changed).
  template <class F>
  void post_event_locked(F f) {
    loop_.post([this, f = std::move(f)]() mutable {
      if (auto* h = handler_.load())
        f(*h);
    });
  }

  std::string address_locked() {
    if (address_.empty())
      address_ = fabric_->client_address();
    return address_;
  }

  // -- called by peers --------------------------------------------------

  caf::expected<peer_id> accept(const std::shared_ptr<loopback_core>& from, peer_id from_id,
                                const std::string& from_address) {
    std::lock_guard lock{mu_};
    if (dead_)
      return make_transport_error(transport_errc::peer_unreachable,
                                  "loopback: the listener is shutting down");
    peer_id id = next_peer_++;
    links_[id] = link{from, from_id, true, from->options_.identity};
    post_event_locked([id, from_address](transport_handler& h) {
      h.on_peer_connected(id, from_address);
    });
    return id;
  }

  bool deliver_message(peer_id as, message msg) {
    std::lock_guard lock{mu_};
    auto i = links_.find(as);
    if (dead_ || i == links_.end() || !i->second.alive)
      return false;
    post_event_locked([as, m = std::move(msg)](transport_handler& h) mutable {
      h.on_message(as, std::move(m));
    });
    return true;
  }

  /// Checks the destinations, copies, queues on_blocks_arrived. `src[i]`
  /// is block i's (already checked) source bytes.
  caf::error deliver_blocks(peer_id as, transfer_batch batch,
                            const std::vector<const std::byte*>& src) {
    std::lock_guard lock{mu_};
    auto i = links_.find(as);
    if (dead_ || i == links_.end() || !i->second.alive)
      return make_transport_error(transport_errc::peer_failed,
                                  "loopback: the peer failed during the transfer");
    for (size_t b = 0; b < batch.blocks.size(); ++b) {
      const auto& blk = batch.blocks[b];
      if (blk.dst == 0 || blk.dst > regions_.size())
        return make_transport_error(
          transport_errc::invalid_message,
          "loopback: block " + std::to_string(b) + " of batch " + std::to_string(batch.batch_id) +
            ": the peer has no region " + std::to_string(blk.dst));
      auto region = regions_[blk.dst - 1];
      if (!in_bounds(blk.dst_offset, blk.size, region.size()))
        return make_transport_error(
          transport_errc::invalid_message,
          "loopback: block " + std::to_string(b) + " of batch " + std::to_string(batch.batch_id) +
            ": destination range " + range_text(blk.dst_offset, blk.size) +
            " is outside the peer's region " + std::to_string(blk.dst) + " of " +
            std::to_string(region.size()) + " bytes");
    }
    for (size_t b = 0; b < batch.blocks.size(); ++b) {
      const auto& blk = batch.blocks[b];
      if (blk.size > 0) // memmove: a transport connected to itself may overlap
        std::memmove(regions_[blk.dst - 1].data() + blk.dst_offset, src[b], blk.size);
    }
    post_event_locked([as, batch = std::move(batch)](transport_handler& h) {
      h.on_blocks_arrived(as, batch);
    });
    return {};
  }

  void peer_closed(peer_id as, caf::error why) {
    std::lock_guard lock{mu_};
    auto i = links_.find(as);
    if (dead_ || i == links_.end() || !i->second.alive)
      return;
    i->second.alive = false;
    post_event_locked([as, why = std::move(why)](transport_handler& h) {
      h.on_peer_failed(as, why);
    });
  }

  // -- own side -----------------------------------------------------------

  /// Marks this core dead, tells every live peer `why`, releases the
  /// addresses and stops the loop.
  void shutdown(const caf::error& why, bool run_cancels) {
    std::vector<std::pair<std::shared_ptr<loopback_core>, peer_id>> notify;
    {
      std::lock_guard lock{mu_};
      if (dead_)
        return;
      dead_ = true;
      for (auto& [id, l] : links_) {
        if (l.alive && l.remote_id != 0)
          if (auto r = l.remote.lock())
            notify.emplace_back(std::move(r), l.remote_id);
        l.alive = false;
      }
    }
    fabric_->unbind(this);
    for (auto& [r, rid] : notify)
      r->peer_closed(rid, why);
    loop_.stop(run_cancels);
  }

  /// The link to `to` for an operation, or the error to complete it with.
  caf::expected<std::pair<std::shared_ptr<loopback_core>, peer_id>> route_locked(peer_id to) {
    if (dead_)
      return closed_error();
    auto i = links_.find(to);
    if (i == links_.end())
      return make_transport_error(transport_errc::not_connected,
                                  "loopback: no connection to peer " + std::to_string(to));
    if (!i->second.alive)
      return make_transport_error(transport_errc::peer_failed,
                                  "loopback: peer " + std::to_string(to) + " has failed");
    auto r = i->second.remote.lock();
    if (!r)
      return make_transport_error(transport_errc::peer_failed,
                                  "loopback: peer " + std::to_string(to) + " is gone");
    return std::pair{std::move(r), i->second.remote_id};
  }
};

} // namespace detail

// -- loopback_fabric ----------------------------------------------------------

std::shared_ptr<loopback_fabric> loopback_fabric::make() {
  return std::shared_ptr<loopback_fabric>{new loopback_fabric};
}

caf::expected<std::string> loopback_fabric::bind(const std::string& address,
                                                 std::shared_ptr<detail::loopback_core> core) {
  auto parts = split_address(address);
  if (!parts)
    return make_transport_error(transport_errc::invalid_message,
                                "loopback: listen address '" + address +
                                  "' is not host:port (port 0..65535)");
  std::lock_guard lock{mu_};
  std::string bound = address;
  if (parts->second == 0) {
    do {
      bound = parts->first + ":" + std::to_string(next_port_++);
    } while (listeners_.count(bound) != 0 && !listeners_[bound].expired());
  } else if (auto i = listeners_.find(bound); i != listeners_.end() && !i->second.expired()) {
    return make_transport_error(transport_errc::address_in_use,
                                "loopback: address '" + address + "' is already bound");
  }
  listeners_[bound] = core;
  return bound;
}

std::shared_ptr<detail::loopback_core> loopback_fabric::find(const std::string& address) const {
  std::lock_guard lock{mu_};
  auto i = listeners_.find(address);
  return i == listeners_.end() ? nullptr : i->second.lock();
}

void loopback_fabric::unbind(const detail::loopback_core* core) {
  std::lock_guard lock{mu_};
  for (auto i = listeners_.begin(); i != listeners_.end();) {
    auto p = i->second.lock();
    if (!p || p.get() == core)
      i = listeners_.erase(i);
    else
      ++i;
  }
}

std::string loopback_fabric::client_address() {
  std::lock_guard lock{mu_};
  return "loopback-client:" + std::to_string(next_port_++);
}

// -- loopback_transport -------------------------------------------------------

loopback_transport::loopback_transport(std::shared_ptr<loopback_fabric> fabric,
                                       transport_options options)
  : core_(std::make_shared<detail::loopback_core>(std::move(fabric), options)) {
  TESSERA_ASSERT(core_->fabric_ != nullptr, "loopback_transport needs a fabric");
}

loopback_transport::~loopback_transport() {
  TESSERA_ASSERT(!core_->loop_.in_loop(), "loopback_transport destroyed from its own callback");
  core_->shutdown(closed_error(), true);
  core_->loop_.join();
}

const capabilities& loopback_transport::caps() const {
  return core_->caps_;
}

void loopback_transport::set_handler(transport_handler* handler) {
  core_->handler_.store(handler);
}

caf::expected<std::string> loopback_transport::listen(const std::string& address) {
  {
    std::lock_guard lock{core_->mu_};
    if (core_->dead_)
      return closed_error();
  }
  auto bound = core_->fabric_->bind(address, core_);
  if (bound) {
    std::lock_guard lock{core_->mu_};
    if (core_->address_.empty())
      core_->address_ = *bound;
  }
  return bound;
}

caf::expected<peer_id> loopback_transport::connect(const std::string& address) {
  auto remote = core_->fabric_->find(address);
  if (!remote)
    return make_transport_error(transport_errc::peer_unreachable,
                                "loopback: nothing listens at '" + address + "'");
  peer_id id = 0;
  std::string my_address;
  {
    std::lock_guard lock{core_->mu_};
    if (core_->dead_)
      return closed_error();
    id = core_->next_peer_++;
    // Exists before the listener learns of us, so its first message finds it.
    core_->links_[id] = detail::loopback_core::link{remote, 0, true, remote->options_.identity};
    my_address = core_->address_locked();
  }
  auto rid = remote->accept(core_, id, my_address);
  if (!rid) {
    std::lock_guard lock{core_->mu_};
    core_->links_.erase(id);
    return std::move(rid.error());
  }
  {
    std::lock_guard lock{core_->mu_};
    auto& l = core_->links_[id];
    if (!core_->dead_ && l.alive) {
      l.remote_id = *rid;
      return id;
    }
  }
  // Killed or disconnected while connecting: make sure the listener hears.
  remote->peer_closed(*rid, closed_error());
  return make_transport_error(transport_errc::closed,
                              "loopback: the connection to '" + address +
                                "' closed while it was being set up");
}

caf::expected<region_id> loopback_transport::register_region(std::span<std::byte> memory) {
  std::lock_guard lock{core_->mu_};
  if (core_->dead_)
    return closed_error();
  core_->regions_.push_back(memory);
  return static_cast<region_id>(core_->regions_.size());
}

caf::expected<allocated_region> loopback_transport::allocate_region(uint64_t bytes) {
  if (bytes == 0)
    return make_transport_error(transport_errc::invalid_message, "loopback: empty region");
  std::lock_guard lock{core_->mu_};
  if (core_->dead_)
    return closed_error();
  auto& mem = core_->owned_.emplace_back(std::make_unique<std::byte[]>(bytes)); // zeroed
  std::span<std::byte> memory{mem.get(), bytes};
  core_->regions_.push_back(memory);
  return allocated_region{static_cast<region_id>(core_->regions_.size()), memory};
}

void loopback_transport::send(peer_id to, message msg, completion done) {
  if (msg.frame.size() > core_->options_.max_message_bytes) {
    core_->complete(done, make_transport_error(
                            transport_errc::message_too_large,
                            "loopback: frame of " + std::to_string(msg.frame.size()) +
                              " bytes exceeds max_message_bytes " +
                              std::to_string(core_->options_.max_message_bytes)));
    return;
  }
  if (msg.actor.size() > max_actor_name_bytes) {
    core_->complete(done, make_transport_error(transport_errc::message_too_large,
                                               "loopback: actor name of " +
                                                 std::to_string(msg.actor.size()) +
                                                 " bytes exceeds 64"));
    return;
  }
  auto route = [&] {
    std::lock_guard lock{core_->mu_};
    return core_->route_locked(to);
  }();
  if (!route) {
    core_->complete(done, std::move(route.error()));
    return;
  }
  auto& [remote, rid] = *route;
  if (remote->deliver_message(rid, std::move(msg)))
    core_->complete(done, {});
  else
    core_->complete(done, make_transport_error(transport_errc::peer_failed,
                                               "loopback: peer " + std::to_string(to) +
                                                 " failed before the message was delivered"));
}

void loopback_transport::transfer(peer_id to, transfer_batch batch, completion done) {
  std::vector<const std::byte*> src;
  caf::error bad;
  auto route = [&] {
    std::lock_guard lock{core_->mu_};
    auto route = core_->route_locked(to);
    if (route) {
      src.reserve(batch.blocks.size());
      for (size_t b = 0; b < batch.blocks.size() && !bad; ++b) {
        const auto& blk = batch.blocks[b];
        const auto& regions = core_->regions_;
        if (blk.src == 0 || blk.src > regions.size()) {
          bad = make_transport_error(transport_errc::invalid_message,
                                     "loopback: block " + std::to_string(b) + " of batch " +
                                       std::to_string(batch.batch_id) + ": no local region " +
                                       std::to_string(blk.src));
        } else if (auto r = regions[blk.src - 1]; !in_bounds(blk.src_offset, blk.size, r.size())) {
          bad = make_transport_error(
            transport_errc::invalid_message,
            "loopback: block " + std::to_string(b) + " of batch " +
              std::to_string(batch.batch_id) + ": source range " +
              range_text(blk.src_offset, blk.size) + " is outside local region " +
              std::to_string(blk.src) + " of " + std::to_string(r.size()) + " bytes");
        } else {
          src.push_back(r.data() + blk.src_offset);
        }
      }
    }
    return route;
  }();
  if (!route) {
    core_->complete(done, std::move(route.error()));
    return;
  }
  if (bad) {
    core_->complete(done, std::move(bad));
    return;
  }
  auto& [remote, rid] = *route;
  core_->complete(done, remote->deliver_blocks(rid, std::move(batch), src));
}

std::string loopback_transport::peer_identity(peer_id peer) const {
  std::lock_guard lock{core_->mu_};
  auto i = core_->links_.find(peer);
  return i == core_->links_.end() ? std::string{} : i->second.identity;
}

void loopback_transport::disconnect(peer_id peer) {
  std::shared_ptr<detail::loopback_core> remote;
  peer_id rid = 0;
  {
    std::lock_guard lock{core_->mu_};
    auto i = core_->links_.find(peer);
    if (core_->dead_ || i == core_->links_.end() || !i->second.alive)
      return;
    i->second.alive = false;
    remote = i->second.remote.lock();
    rid = i->second.remote_id;
    core_->post_event_locked([peer](transport_handler& h) {
      h.on_peer_failed(peer, make_transport_error(transport_errc::closed,
                                                  "loopback: disconnected locally"));
    });
  }
  if (remote && rid != 0)
    remote->peer_closed(rid, make_transport_error(transport_errc::closed,
                                                  "loopback: the peer disconnected"));
}

void loopback_transport::kill() {
  core_->shutdown(make_transport_error(transport_errc::peer_failed,
                                       "loopback: the peer crashed (killed)"),
                  false);
}

} // namespace tessera::transport
