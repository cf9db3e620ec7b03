#include "actors/kvstore/kvstore_actor.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>

#include <spdlog/spdlog.h>

namespace tessera::actors {

namespace {

namespace wire = transport::wire;

/// The interface plus the actor's own ticks.
using kvstore_impl = kvstore_actor::extend<
  /// Time to send the store's events.
  caf::reacts_to<step_atom>,
  /// Time to repeat the join, report the load and update the metrics.
  caf::reacts_to<heartbeat_atom>>;

/// Hashes per kv_event (well under wire_limits::max_event_hashes).
constexpr size_t hashes_per_event = 4096;

/// One of the actors that read blocks for fetches, on its own thread (a
/// read may wait on disk); the store actor hands each fetch to the next,
/// with the steady_clock times (ticks since its epoch) it was handed over
/// and after which its asker no longer waits for it (0: none).
using kvstore_reader = caf::typed_actor<
  caf::replies_to<fetch_atom, wire::kv_fetch_request, int64_t, int64_t>::with<wire::kv_fetch_reply>>;

/// Where a fetch's time at the store goes, in the registry's histograms
/// (none without a registry): waiting for a reader, and the read.
struct fetch_timing {
  std::shared_ptr<cluster::metrics_registry> registry;
  cluster::metric_histogram* queued = nullptr;
  cluster::metric_histogram* read = nullptr;

  explicit fetch_timing(std::shared_ptr<cluster::metrics_registry> r) : registry(std::move(r)) {
    if (!registry)
      return;
    const auto stage = [&](const char* name) {
      return &registry->histogram("tessera_kvstore_fetch_stage_seconds",
                                  "Time a prefix fetch spent in the kv store, by stage: queued (handed to a "
                                  "reader until it took it up) and read (the reader's read of the blocks; not "
                                  "for fetches answered unread because their askers had stopped waiting).",
                                  cluster::latency_buckets_seconds(), {{"stage", name}});
    };
    queued = stage("queued");
    read = stage("read");
  }
};

using clock_ticks = std::chrono::steady_clock::duration;

/// Seconds from `from` (steady_clock ticks since its epoch) to `to`.
double seconds_between(int64_t from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to.time_since_epoch() - clock_ticks{from}).count();
}

/// The reader holds the store weakly: the node closes its store when it
/// stops (RocksDB's files and lock go with it), whether or not its readers
/// have processed their exit yet. A fetch after that finds nothing. A fetch
/// whose asker stopped waiting before its turn came is answered empty
/// unread and counted in `expired`.
kvstore_reader::behavior_type reader_fn(std::weak_ptr<kvstore::block_store> store,
                                        std::shared_ptr<std::atomic<uint64_t>> expired,
                                        std::shared_ptr<fetch_timing> timing) {
  return {
    [store, expired, timing](fetch_atom, const wire::kv_fetch_request& r, int64_t handed, int64_t until) {
      const auto start = std::chrono::steady_clock::now();
      if (timing->queued != nullptr)
        timing->queued->observe(seconds_between(handed, start));
      if (until != 0 && start.time_since_epoch().count() > until) {
        expired->fetch_add(1, std::memory_order_relaxed);
        return wire::kv_fetch_reply{};
      }
      auto s = store.lock();
      auto reply = s ? read_chain(*s, r) : wire::kv_fetch_reply{};
      if (timing->read != nullptr)
        timing->read->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return reply;
    },
  };
}

struct kvstore_state {
  static inline const char* name = "kvstore";
  kvstore_config cfg;
  std::vector<kvstore_reader> readers;
  size_t next_reader = 0;
  uint64_t next_event = 0;
  /// Fetches given to the readers and not answered yet.
  size_t fetches_in_flight = 0;
  /// Fetches answered busy (the bound was reached), and how many of them
  /// were exported to the metrics.
  uint64_t fetches_rejected = 0;
  uint64_t fetches_rejected_exported = 0;
  /// Fetches the readers answered unread because their askers had stopped
  /// waiting (kv_fetch_request::wait_ms), and how many were exported.
  std::shared_ptr<std::atomic<uint64_t>> fetches_expired = std::make_shared<std::atomic<uint64_t>>(0);
  uint64_t fetches_expired_exported = 0;
  /// Last counter values exported (the registry's counters only add).
  kvstore::store_stats exported;
};

using kvstore_pointer = kvstore_impl::stateful_pointer<kvstore_state>;

void tell_router(kvstore_pointer self, caf::message msg) {
  const auto& to = self->state.cfg.router;
  if (to.empty())
    return;
  for (const auto& more : self->state.cfg.more_routers)
    caf::anon_send(self->state.cfg.bridge, forward_atom_v, more.node, more.actor, msg);
  caf::anon_send(self->state.cfg.bridge, forward_atom_v, to.node, to.actor, std::move(msg));
}

wire::kv_tier wire_tier(kvstore::kv_tier t) {
  return t == kvstore::kv_tier::host ? wire::kv_tier::g2_host : wire::kv_tier::g3_disk;
}

void send_event(kvstore_pointer self, wire::kv_event_kind kind, wire::kv_tier tier,
                std::vector<engine::kv_block_hash> hashes) {
  wire::kv_event ev;
  ev.worker_id = self->state.cfg.store_id;
  ev.event_id = self->state.next_event++;
  ev.tier = tier;
  ev.kind = kind;
  ev.block_hashes = std::move(hashes);
  tell_router(self, caf::make_message(kv_events_atom_v, std::move(ev)));
}

/// Starts the router's view of this store over: "cleared", then (with the
/// next events) every block held, which record_events(true) emits.
void resend_view(kvstore_pointer self, const char* why) {
  auto& st = self->state;
  spdlog::info("kvstore {}: re-announcing every block to the router ({})", st.cfg.name, why);
  send_event(self, wire::kv_event_kind::cleared, wire::kv_tier::g2_host, {});
  st.cfg.store->record_events(false);
  st.cfg.store->record_events(true);
}

void publish_events(kvstore_pointer self) {
  auto& st = self->state;
  bool lost = false;
  for (auto& run : st.cfg.store->drain_events()) {
    if (run.what == kvstore::store_event::kind::lost) {
      lost = true;
      continue;
    }
    if (run.ns != st.cfg.hash_seed)
      continue; // another model's blocks: not this router's business
    const auto kind = run.what == kvstore::store_event::kind::stored ? wire::kv_event_kind::stored
                                                                    : wire::kv_event_kind::removed;
    for (size_t i = 0; i < run.hashes.size(); i += hashes_per_event) {
      const auto end = std::min(run.hashes.size(), i + hashes_per_event);
      send_event(self, kind, wire_tier(run.tier), {run.hashes.begin() + static_cast<std::ptrdiff_t>(i),
                                                   run.hashes.begin() + static_cast<std::ptrdiff_t>(end)});
    }
  }
  if (lost) {
    spdlog::warn("kvstore {}: its event buffer overflowed and events were lost", st.cfg.name);
    resend_view(self, "events were lost");
  }
}

wire::heartbeat load_of(kvstore_pointer self) {
  const auto s = self->state.cfg.store->stats();
  wire::heartbeat h;
  h.node_id = self->state.cfg.node + "/" + self->state.cfg.name;
  h.kv_usage.push_back({wire::kv_tier::g2_host, s.host.used_bytes, std::max(s.host.used_bytes, s.host.capacity_bytes)});
  if (s.disk.capacity_bytes > 0)
    h.kv_usage.push_back({wire::kv_tier::g3_disk, s.disk.used_bytes, std::max(s.disk.used_bytes, s.disk.capacity_bytes)});
  return h;
}

/// Adds to `c` what `now` has beyond `before` (counters only go up).
void export_counter(cluster::metric_counter& c, uint64_t now, uint64_t before) {
  if (now > before)
    c.inc(static_cast<double>(now - before));
}

void export_metrics(kvstore_pointer self) {
  auto& st = self->state;
  if (!st.cfg.metrics)
    return;
  auto& r = *st.cfg.metrics;
  const auto s = st.cfg.store->stats();
  auto tier = [&](const char* name, const kvstore::tier_stats& now, const kvstore::tier_stats& before) {
    const cluster::metric_labels l{{"tier", name}};
    r.gauge("tessera_kvstore_blocks", "Blocks the node's kv store holds, per tier.", l)
      .set(static_cast<double>(now.blocks));
    r.gauge("tessera_kvstore_used_bytes", "Bytes the node's kv store holds, per tier.", l)
      .set(static_cast<double>(now.used_bytes));
    r.gauge("tessera_kvstore_capacity_bytes", "Capacity of the node's kv store, per tier.", l)
      .set(static_cast<double>(now.capacity_bytes));
    export_counter(r.counter("tessera_kvstore_hits_total", "Blocks read from the kv store, per tier.", l),
                   now.hits, before.hits);
    export_counter(r.counter("tessera_kvstore_misses_total", "Kv store reads that found no usable block.", l),
                   now.misses, before.misses);
    export_counter(r.counter("tessera_kvstore_evictions_total", "Blocks evicted from a kv store tier.", l),
                   now.evictions, before.evictions);
    export_counter(r.counter("tessera_kvstore_checksum_failures_total",
                             "Kv store blocks that failed verification on a read (served as misses).", l),
                   now.checksum_failures, before.checksum_failures);
    export_counter(r.counter("tessera_kvstore_io_errors_total", "Kv store disk read and write errors.", l),
                   now.io_errors, before.io_errors);
  };
  tier("host", s.host, st.exported.host);
  tier("disk", s.disk, st.exported.disk);
  export_counter(r.counter("tessera_kvstore_spills_total", "Blocks written from host memory to disk.", {}),
                 s.spills, st.exported.spills);
  export_counter(r.counter("tessera_kvstore_spill_drops_total",
                           "Blocks evicted from host memory and lost because the spill queue stayed full.", {}),
                 s.spill_drops, st.exported.spill_drops);
  export_counter(r.counter("tessera_kvstore_promotions_total", "Disk hits copied back into host memory.", {}),
                 s.promotions, st.exported.promotions);
  export_counter(r.counter("tessera_kvstore_promotion_skips_total",
                           "Disk hits left on disk because the spill queue was full.", {}),
                 s.promotion_skips, st.exported.promotion_skips);
  export_counter(r.counter("tessera_kvstore_int8_blocks_total",
                           "Blocks put into an int8 kv store (--kv-store-int8) that it keeps quantized.", {}),
                 s.int8_blocks, st.exported.int8_blocks);
  export_counter(r.counter("tessera_kvstore_int8_refused_total",
                           "Blocks put into an int8 kv store that the quantizer refused (a NaN or an infinity), "
                           "kept exact.",
                           {}),
                 s.int8_refused, st.exported.int8_refused);
  export_counter(r.counter("tessera_kvstore_decode_failures_total",
                           "Blocks found in a kv store tier that could not be decoded (served as misses).", {}),
                 s.decode_failures, st.exported.decode_failures);
  export_counter(r.counter("tessera_kvstore_disk_reset_total",
                           "Disk tiers that could not be opened (corrupt WAL, MANIFEST, CURRENT...) and were "
                           "moved aside to <dir>.corrupt-<time> and started cold.",
                           {}),
                 s.disk_resets, st.exported.disk_resets);
  r.gauge("tessera_kvstore_disk_disabled",
          "1 while the configured disk tier is off because it could not be opened or written (read-only, "
          "full, locked); the store serves from host memory only.",
          {})
    .set(static_cast<double>(s.disk_disabled));
  export_counter(r.counter("tessera_kvstore_fetch_rejected_total",
                           "Fetches the kv store answered busy at once because max_fetches_in_flight were "
                           "queued or being read (their workers computed instead).",
                           {}),
                 st.fetches_rejected, st.fetches_rejected_exported);
  st.fetches_rejected_exported = st.fetches_rejected;
  const uint64_t expired = st.fetches_expired->load(std::memory_order_relaxed);
  export_counter(r.counter("tessera_kvstore_fetch_expired_total",
                           "Fetches the kv store answered empty without reading because their askers had "
                           "stopped waiting (wait_ms) before a reader took them (they computed instead).",
                           {}),
                 expired, st.fetches_expired_exported);
  st.fetches_expired_exported = expired;
  st.exported = s;
}

void on_heartbeat(kvstore_pointer self) {
  auto& st = self->state;
  wire::worker_join j;
  j.worker_id = st.cfg.store_id;
  j.at = {st.cfg.node, st.cfg.name};
  j.roles = {wire::node_role::kvstore};
  j.model_fingerprint = st.cfg.model_fingerprint;
  j.block_tokens = st.cfg.block_tokens;
  j.num_blocks = static_cast<int32_t>(std::clamp<uint64_t>(st.cfg.store->stats().host.blocks, 1, INT32_MAX));
  j.hash_seed = st.cfg.hash_seed;
  tell_router(self, caf::make_message(join_atom_v, std::move(j)));
  tell_router(self, caf::make_message(heartbeat_atom_v, load_of(self)));
  export_metrics(self);
  self->delayed_send(self, st.cfg.heartbeat_interval, heartbeat_atom_v);
}

kvstore_impl::behavior_type kvstore_fn(kvstore_pointer self, kvstore_config cfg) {
  self->state.cfg = std::move(cfg);
  auto timing = std::make_shared<fetch_timing>(self->state.cfg.metrics);
  for (size_t i = 0; i < std::max<size_t>(1, self->state.cfg.readers); ++i)
    self->state.readers.push_back(self->spawn<caf::linked + caf::detached>(
      reader_fn, std::weak_ptr<kvstore::block_store>{self->state.cfg.store}, self->state.fetches_expired, timing));
  // The join goes out before the first events: the router indexes a
  // store's events by the id its join announced.
  on_heartbeat(self);
  self->state.cfg.store->record_events(!self->state.cfg.router.empty());
  self->send(self, step_atom_v);
  return {
    [self](fetch_atom, const wire::kv_fetch_request& r) -> caf::result<wire::kv_fetch_reply> {
      auto& st = self->state;
      // A bounded queue in front of the readers: past the bound the asker
      // hears "busy" at once and computes, instead of waiting out its
      // timeout behind reads that may never help it in time.
      if (st.fetches_in_flight >= st.cfg.max_fetches_in_flight) {
        ++st.fetches_rejected;
        wire::kv_fetch_reply busy;
        busy.busy = true;
        return busy;
      }
      ++st.fetches_in_flight;
      // Past the asker's wait its place is given back too: it computes.
      auto timeout = st.cfg.read_timeout;
      const auto now = std::chrono::steady_clock::now();
      int64_t until = 0;
      if (r.wait_ms > 0) {
        const std::chrono::milliseconds wait{r.wait_ms};
        timeout = std::min(timeout, wait);
        until = (now + wait).time_since_epoch().count();
      }
      auto rp = self->make_response_promise<wire::kv_fetch_reply>();
      self->request(st.readers[st.next_reader++ % st.readers.size()], timeout, fetch_atom_v, r,
                    static_cast<int64_t>(now.time_since_epoch().count()), until)
        .then(
          [self, rp](wire::kv_fetch_reply& reply) mutable {
            --self->state.fetches_in_flight;
            rp.deliver(std::move(reply));
          },
          [self, rp](caf::error&) mutable {
            --self->state.fetches_in_flight;
            rp.deliver(wire::kv_fetch_reply{});
          });
      return rp;
    },
    [self](load_atom) { return load_of(self); },
    [self](kv_events_atom) { resend_view(self, "the router asked (it lost some of this store's events)"); },
    [self](step_atom) {
      publish_events(self);
      self->delayed_send(self, self->state.cfg.event_interval, step_atom_v);
    },
    [self](heartbeat_atom) { on_heartbeat(self); },
  };
}

} // namespace

wire::kv_fetch_reply read_chain(kvstore::block_store& store, const wire::kv_fetch_request& r) {
  wire::kv_fetch_reply out;
  auto read = store.get_prefix(r.ns, r.block_hashes, r.max_bytes);
  out.more = read.more;
  out.blocks.reserve(read.hits.size());
  for (size_t i = 0; i < read.hits.size(); ++i) {
    const auto& b = read.hits[i].block;
    if (out.blocks.empty()) {
      out.layout = b.meta.layout;
    } else if (!(b.meta.layout == out.layout)) {
      out.more = false;
      break;
    }
    out.blocks.push_back({r.block_hashes[i], b.meta.token_count, b.meta.checksum, *b.payload});
  }
  return out;
}

kvstore_actor spawn_kvstore(caf::actor_system& sys, kvstore_config cfg) {
  return sys.spawn(kvstore_fn, std::move(cfg));
}

} // namespace tessera::actors
