#include "transport/faults/fault_transport.hpp"

#include <cstring>
#include <utility>

#include "common/assert.hpp"

namespace tessera::transport {

namespace {

caf::error closed_error() {
  return make_transport_error(transport_errc::closed, "faults: transport closed");
}

bool matches(fault_op rule_ops, fault_op op) {
  return (static_cast<uint8_t>(rule_ops) & static_cast<uint8_t>(op)) != 0;
}

} // namespace

/// Receives the inner transport's events (on its thread) and re-posts them
/// on the decorator's loop, dropping messages and batches from partitioned
/// peers.
class fault_transport::relay final : public transport_handler {
public:
  explicit relay(fault_transport& self) : self_(self) {}

  void on_peer_connected(peer_id peer, const std::string& address) override {
    post([peer, address](transport_handler& h) { h.on_peer_connected(peer, address); });
  }

  void on_message(peer_id from, message msg) override {
    if (self_.partitioned(from))
      return;
    post([from, m = std::move(msg)](transport_handler& h) mutable {
      h.on_message(from, std::move(m));
    });
  }

  void on_blocks_arrived(peer_id from, const transfer_batch& batch) override {
    if (self_.partitioned(from))
      return;
    post([from, batch](transport_handler& h) { h.on_blocks_arrived(from, batch); });
  }

  void on_peer_failed(peer_id peer, const caf::error& why) override {
    post([peer, why](transport_handler& h) { h.on_peer_failed(peer, why); });
  }

private:
  template <class F>
  void post(F f) {
    self_.loop_.post([this, f = std::move(f)]() mutable {
      if (auto* h = self_.handler_.load())
        f(*h);
    });
  }

  fault_transport& self_;
};

fault_transport::fault_transport(std::unique_ptr<transport> inner, fault_plan plan,
                                 fault_options options)
  : inner_(std::move(inner)),
    plan_(std::move(plan)),
    options_(std::move(options)),
    rng_(plan_.seed),
    rule_states_(plan_.rules.size()) {
  TESSERA_ASSERT(inner_ != nullptr, "fault_transport needs an inner transport");
  caps_ = inner_->caps();
  caps_.backend = "faults(" + caps_.backend + ")";
  start_ = now();
  relay_ = std::make_unique<relay>(*this);
  inner_->set_handler(relay_.get());
}

fault_transport::~fault_transport() {
  TESSERA_ASSERT(!loop_.in_loop(), "fault_transport destroyed from its own callback");
  // Stop first: delayed forwards must not reach the inner transport while
  // it is destroyed. Their completions run with `closed` (on the loop).
  loop_.stop(true);
  loop_.join();
  // The inner's own shutdown completes its pending operations through
  // wrap(): the loop is stopped, so those run inline (on the inner's
  // thread, while this one waits) with `closed`.
  inner_.reset();
  // Then the held ones, on this thread: callbacks still never overlap.
  std::map<peer_id, operation> held;
  {
    std::lock_guard lock{mu_};
    held.swap(held_);
  }
  for (auto& [peer, op] : held)
    if (op.done)
      op.done(closed_error());
}

std::chrono::steady_clock::time_point fault_transport::now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

void fault_transport::set_handler(transport_handler* handler) {
  handler_.store(handler);
}

caf::expected<std::string> fault_transport::listen(const std::string& address) {
  return inner_->listen(address);
}

caf::expected<peer_id> fault_transport::connect(const std::string& address) {
  return inner_->connect(address);
}

caf::expected<region_id> fault_transport::register_region(std::span<std::byte> memory) {
  auto id = inner_->register_region(memory);
  if (id) {
    std::lock_guard lock{mu_};
    regions_[*id] = memory;
  }
  return id;
}

caf::expected<allocated_region> fault_transport::allocate_region(uint64_t bytes) {
  auto r = inner_->allocate_region(bytes);
  if (r) {
    std::lock_guard lock{mu_};
    regions_[r->id] = r->memory;
  }
  return r;
}

void fault_transport::send(peer_id to, message msg, completion done) {
  operation op;
  op.op = fault_op::send;
  op.to = to;
  op.msg = std::move(msg);
  op.done = std::move(done);
  submit(std::move(op));
}

void fault_transport::transfer(peer_id to, transfer_batch batch, completion done) {
  operation op;
  op.op = fault_op::transfer;
  op.to = to;
  op.batch = std::move(batch);
  op.done = std::move(done);
  submit(std::move(op));
}

void fault_transport::disconnect(peer_id peer) {
  release_held(peer);
  inner_->disconnect(peer);
}

void fault_transport::partition(peer_id peer) {
  std::lock_guard lock{mu_};
  partitioned_.insert(peer);
}

void fault_transport::set_plan(fault_plan plan) {
  {
    std::lock_guard lock{mu_};
    plan_ = std::move(plan);
    rng_ = fault_rng{plan_.seed};
    rule_states_.assign(plan_.rules.size(), rule_state{});
    start_ = now();
    partitioned_.clear();
  }
  flush();
}

fault_plan fault_transport::plan() const {
  std::lock_guard lock{mu_};
  return plan_;
}

void fault_transport::heal(peer_id peer) {
  std::lock_guard lock{mu_};
  partitioned_.erase(peer);
}

bool fault_transport::partitioned(peer_id peer) const {
  std::lock_guard lock{mu_};
  return partitioned_.count(peer) != 0;
}

void fault_transport::flush() {
  std::map<peer_id, operation> held;
  {
    std::lock_guard lock{mu_};
    held.swap(held_);
  }
  for (auto& [peer, op] : held)
    forward(std::move(op));
}

fault_counters fault_transport::counters() const {
  std::lock_guard lock{mu_};
  return counters_;
}

std::vector<fault_event> fault_transport::history() const {
  std::lock_guard lock{mu_};
  return history_;
}

void fault_transport::complete(const completion& done, caf::error err) {
  if (!done)
    return;
  auto run = [done, err = std::move(err)] { done(err); };
  auto cancel = [done] { done(closed_error()); };
  if (!loop_.post(std::move(run), std::move(cancel)))
    done(closed_error());
}

completion fault_transport::wrap(completion done) {
  if (!done)
    return {};
  return [this, done = std::move(done)](const caf::error& err) { complete(done, err); };
}

void fault_transport::forward(operation op) {
  if (op.op == fault_op::send)
    inner_->send(op.to, std::move(op.msg), wrap(std::move(op.done)));
  else
    inner_->transfer(op.to, std::move(op.batch), wrap(std::move(op.done)));
}

void fault_transport::release_held(peer_id peer) {
  std::optional<operation> op;
  {
    std::lock_guard lock{mu_};
    auto i = held_.find(peer);
    if (i == held_.end())
      return;
    op = std::move(i->second);
    held_.erase(i);
  }
  forward(std::move(*op));
}

fault_transport::decision fault_transport::decide_locked(const operation& op, bool corruptible,
                                                         const std::string& peer_name) {
  decision d;
  uint64_t index = ++counters_.operations;
  auto record = [&](fault_kind k) {
    d.faulted = true;
    d.kind = k;
    ++counters_.injected[static_cast<size_t>(k)];
    history_.push_back(fault_event{index, op.op, op.to, k});
  };
  if (partitioned_.count(op.to) != 0) {
    record(fault_kind::partition);
    return d;
  }
  auto t = now();
  for (size_t i = 0; i < plan_.rules.size(); ++i) {
    const auto& r = plan_.rules[i];
    auto& st = rule_states_[i];
    if (!matches(r.ops, op.op) || (r.peer && *r.peer != op.to) ||
        (!r.peer_name.empty() && r.peer_name != peer_name))
      continue;
    ++st.matched;
    bool fire = true;
    if (r.probability) // drawn whether or not the rule fires: see fault_plan.hpp
      fire = rng_.uniform() < *r.probability;
    if (r.every != 0 && st.matched % r.every != 0)
      fire = false;
    if (st.matched < r.from || t - start_ < r.after || (r.limit != 0 && st.fired >= r.limit))
      fire = false;
    // Faults that cannot apply to this operation do not fire.
    if (r.kind == fault_kind::reorder && held_.count(op.to) != 0)
      fire = false;
    if (r.kind == fault_kind::corrupt && !corruptible)
      fire = false;
    if (fire && !d.faulted) {
      ++st.fired;
      d.delay = r.delay;
      d.error = r.error;
      record(r.kind);
    }
  }
  if (d.faulted && d.kind == fault_kind::corrupt)
    d.draw = rng_.next();
  if (d.faulted && d.kind == fault_kind::partition)
    partitioned_.insert(op.to);
  return d;
}

void fault_transport::submit(operation op) {
  decision d;
  // Asked before taking mu_: the inner transport's lock is never taken
  // under ours (its threads call the relay, which takes ours).
  const auto peer_name = inner_->peer_identity(op.to);
  {
    std::lock_guard lock{mu_};
    bool corruptible = false;
    if (op.op == fault_op::send) {
      corruptible = !op.msg.frame.empty();
    } else {
      for (const auto& b : op.batch.blocks) {
        if (b.size == 0)
          continue;
        auto r = regions_.find(b.src);
        corruptible = r != regions_.end() && b.src_offset <= r->second.size() &&
                      b.size <= r->second.size() - b.src_offset;
        break;
      }
    }
    d = decide_locked(op, corruptible, peer_name);
    if (d.faulted && d.kind == fault_kind::reorder) {
      // Held under the same lock as the decision, so a concurrent operation
      // to this peer sees the slot taken.
      held_.emplace(op.to, std::move(op));
      return;
    }
  }
  peer_id to = op.to;
  apply(std::move(op), d);
  release_held(to);
}

void fault_transport::apply(operation op, const decision& d) {
  if (!d.faulted) {
    forward(std::move(op));
    return;
  }
  auto injected = [&](transport_errc code, const std::string& what) {
    return make_transport_error(code, "faults: " + what + " (injected) on operation to peer " +
                                        std::to_string(op.to));
  };
  switch (d.kind) {
    case fault_kind::drop:
      if (op.op == fault_op::send)
        complete(op.done, {});
      else
        complete(op.done, injected(transport_errc::timeout, "transfer dropped"));
      return;
    case fault_kind::delay: {
      auto done = op.done;
      auto due = std::chrono::steady_clock::now() + d.delay;
      auto shared = std::make_shared<operation>(std::move(op));
      bool posted = loop_.post_at(
        due, [this, shared] { forward(std::move(*shared)); },
        [done] {
          if (done)
            done(closed_error());
        });
      if (!posted && done)
        done(closed_error());
      return;
    }
    case fault_kind::duplicate: {
      struct join_state {
        std::mutex mu;
        int left = 2;
        caf::error first_error;
      };
      auto js = std::make_shared<join_state>();
      auto done = std::move(op.done);
      auto joined = [js, done](const caf::error& err) {
        caf::error result;
        {
          std::lock_guard lock{js->mu};
          if (err && !js->first_error)
            js->first_error = err;
          if (--js->left != 0)
            return;
          result = js->first_error;
        }
        if (done)
          done(result);
      };
      operation copy = op;
      copy.done = joined;
      op.done = joined;
      forward(std::move(copy));
      forward(std::move(op));
      return;
    }
    case fault_kind::reorder: // held in submit()
      return;
    case fault_kind::corrupt:
      if (op.op == fault_op::send) {
        auto& f = op.msg.frame;
        f[d.draw % f.size()] ^= static_cast<std::byte>(1 + (d.draw >> 32) % 255);
      } else if (!corrupt_transfer(op, d.draw)) {
        complete(op.done, injected(transport_errc::invalid_message,
                                   "could not stage the corrupted block"));
        return;
      }
      forward(std::move(op));
      return;
    case fault_kind::fail:
      complete(op.done, injected(d.error, "operation failed"));
      return;
    case fault_kind::partition:
      complete(op.done, injected(transport_errc::peer_unreachable, "peer partitioned"));
      return;
  }
}

bool fault_transport::corrupt_transfer(operation& op, uint64_t draw) {
  block_copy* blk = nullptr;
  for (auto& b : op.batch.blocks)
    if (b.size != 0) {
      blk = &b;
      break;
    }
  if (blk == nullptr)
    return false;
  std::span<std::byte> scratch;
  {
    std::lock_guard lock{mu_};
    auto src = regions_.at(blk->src); // checked in submit()
    scratch_.push_back(std::make_unique<std::byte[]>(blk->size));
    scratch = {scratch_.back().get(), blk->size};
    std::memcpy(scratch.data(), src.data() + blk->src_offset, blk->size);
  }
  scratch[draw % blk->size] ^= static_cast<std::byte>(1 + (draw >> 32) % 255);
  // Registered with the inner only: the corrupted bytes travel as if the
  // network had flipped them, and the caller's source stays intact.
  auto id = inner_->register_region(scratch);
  if (!id)
    return false;
  blk->src = *id;
  blk->src_offset = 0;
  return true;
}

} // namespace tessera::transport
