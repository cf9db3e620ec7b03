#include "kvstore/tiered_block_store.hpp"

#include "kvstore/block_quant.hpp"
#include "kvstore/kvstore_errc.hpp"

namespace tessera::kvstore {

size_t prefix_match::count(kv_tier t) const {
  size_t n = 0;
  for (auto x : tiers)
    n += x == t ? 1 : 0;
  return n;
}

tiered_block_store::tiered_block_store(const tiered_store_options& opts)
    : opts_(opts), events_(opts.max_pending_event_hashes),
      host_(opts.host_capacity_bytes, &events_),
      queue_(opts.spill_queue_blocks, opts.spill_queue_bytes) {}

caf::expected<std::unique_ptr<tiered_block_store>>
tiered_block_store::open(tiered_store_options opts) {
  auto bad = [](const std::string& what) {
    return make_kvstore_error(kvstore_errc::bad_config, "kvstore: " + what);
  };
  if (opts.host_capacity_bytes == 0)
    return bad("host_capacity_bytes must be positive");
  if (opts.spill_queue_blocks == 0 || opts.spill_queue_bytes == 0)
    return bad("the spill queue needs room for at least one block");
  if (opts.spill_wait.count() < 0)
    return bad("spill_wait must not be negative");
  if (opts.tier_codec != block_codec::exact && opts.tier_codec != block_codec::int8)
    return bad("unknown tier_codec " + std::to_string(static_cast<int>(opts.tier_codec)));
  std::unique_ptr<tiered_block_store> store{new tiered_block_store{opts}};
  if (opts.disk) {
    auto disk = open_disk_tier(*opts.disk, &store->events_, opts.keep_corrupt_disk_dirs);
    if (!disk)
      return std::move(disk.error());
    store->disk_report_ = std::move(disk->report);
    store->disk_ = std::move(disk->tier);
    if (store->disk_)
      store->spill_thread_ = std::thread{[s = store.get()] { s->spill_loop(); }};
  }
  return store;
}

tiered_block_store::~tiered_block_store() {
  queue_.close(opts_.drain_spills_on_close);
  if (spill_thread_.joinable())
    spill_thread_.join();
  disk_.reset();
}

void tiered_block_store::spill_loop() {
  while (auto item = queue_.front()) {
    switch (disk_->put(item->key, item->block)) {
      case rocksdb_tier::put_status::stored: ++spills_; break;
      case rocksdb_tier::put_status::already_present: ++spill_skips_; break;
      case rocksdb_tier::put_status::too_large:
      case rocksdb_tier::put_status::io_error: ++spill_failures_; break;
    }
    queue_.done(item->key);
  }
}

void tiered_block_store::spill(const block_key& key, stored_block b) {
  if (!disk_)
    return; // host only: eviction is final
  if (disk_->contains(key)) {
    ++spill_skips_;
    return;
  }
  switch (queue_.push(key, std::move(b), opts_.spill_wait)) {
    case spill_queue::push_result::queued: break;
    case spill_queue::push_result::already_queued: ++spill_skips_; break;
    case spill_queue::push_result::dropped: ++spill_drops_; break;
  }
}

bool tiered_block_store::promote(const block_key& key, const stored_block& b) {
  // A read never waits for writes: with the spill queue full, what the
  // promotion would evict could not be spilled without waiting, so the
  // block is served from where it is and stays there.
  if (disk_ && !queue_.has_space(b.payload_bytes())) {
    ++promotion_skips_;
    return false;
  }
  auto r = host_.insert(key, b);
  for (auto& e : r.evicted)
    spill(e.key, std::move(e.block));
  return r.stored;
}

block_key tiered_block_store::tier_key(const block_key& key) const {
  if (opts_.tier_codec == block_codec::int8)
    return block_key{key.ns ^ int8_namespace_tag, key.hash};
  return key;
}

stored_block tiered_block_store::encode(stored_block b) {
  if (opts_.tier_codec != block_codec::int8)
    return b;
  if (auto q = encode_int8_block(b))
    return std::move(*q);
  return b; // a NaN or an infinity: kept exact (counted by put)
}

std::optional<stored_block> tiered_block_store::decode(stored_block b) const {
  if (b.meta.codec == block_codec::exact)
    return b;
  // An exact store never wrote int8 blocks: one under its key would be a
  // namespace collision, not its block.
  std::optional<stored_block> out;
  if (opts_.tier_codec == block_codec::int8)
    out = decode_int8_block(b);
  if (!out)
    ++decode_failures_;
  return out;
}

caf::error tiered_block_store::put(const block_key& caller_key, stored_block b) {
  if (auto err = validate_block(caller_key, b)) {
    ++put_rejects_;
    return err;
  }
  const block_key key = tier_key(caller_key);
  b = encode(std::move(b));
  if (host_tier::charge(b) > host_.capacity_bytes() &&
      (!disk_ || rocksdb_tier::charge(b) > disk_->capacity_bytes())) {
    ++put_rejects_;
    return make_kvstore_error(kvstore_errc::too_large,
                              "kvstore: block " + to_string(caller_key) + " of " +
                                  std::to_string(b.payload_bytes()) +
                                  " bytes is larger than every tier");
  }
  ++puts_;
  if (opts_.tier_codec == block_codec::int8)
    ++(b.meta.codec == block_codec::int8 ? int8_blocks_ : int8_refused_);
  auto r = host_.insert(key, b);
  if (r.too_large)
    spill(key, std::move(b));
  for (auto& e : r.evicted)
    spill(e.key, std::move(e.block));
  return {};
}

std::optional<block_hit> tiered_block_store::get(const block_key& caller_key) {
  auto hit = find(tier_key(caller_key));
  if (!hit)
    return std::nullopt;
  auto b = decode(std::move(hit->block));
  if (!b)
    return std::nullopt;
  hit->block = std::move(*b);
  return hit;
}

std::optional<block_hit> tiered_block_store::find(const block_key& key) {
  if (auto b = host_.get(key))
    return block_hit{kv_tier::host, std::move(*b)};
  if (!disk_)
    return std::nullopt;
  if (auto b = queue_.find(key); b && verify_block(*b)) {
    ++queue_hits_;
    promote(key, *b);
    return block_hit{kv_tier::host, std::move(*b)};
  }
  if (auto b = disk_->get(key)) {
    if (promote(key, *b))
      ++promotions_;
    return block_hit{kv_tier::disk, std::move(*b)};
  }
  return std::nullopt;
}

prefix_match tiered_block_store::lookup(uint64_t ns,
                                        std::span<const engine::kv_block_hash> chain,
                                        lookup_mode mode) {
  ns = tier_key(block_key{ns, 0}).ns;
  prefix_match m;
  m.tiers.reserve(chain.size());
  for (auto h : chain) {
    const block_key key{ns, h};
    if (mode == lookup_mode::probe) {
      if (host_.contains(key) || (disk_ && queue_.find(key)))
        m.tiers.push_back(kv_tier::host);
      else if (disk_ && disk_->contains(key))
        m.tiers.push_back(kv_tier::disk);
      else
        break;
      continue;
    }
    if (host_.touch(key)) {
      m.tiers.push_back(kv_tier::host);
      continue;
    }
    if (!disk_)
      break;
    if (auto b = queue_.find(key); b && verify_block(*b)) {
      ++queue_hits_;
      promote(key, *b);
      m.tiers.push_back(kv_tier::host);
      continue;
    }
    // The index check first: a miss on disk then costs no I/O.
    if (!disk_->contains(key))
      break;
    auto b = disk_->get(key);
    if (!b)
      break;
    if (promote(key, *b))
      ++promotions_;
    m.tiers.push_back(kv_tier::disk);
  }
  return m;
}

bool tiered_block_store::contains(const block_key& caller_key) const {
  const block_key key = tier_key(caller_key);
  return host_.contains(key) || (disk_ && (queue_.find(key) || disk_->contains(key)));
}

void tiered_block_store::record_events(bool on) {
  if (!events_.set_recording(on))
    return;
  host_.push_snapshot(events_);
  if (disk_)
    disk_->push_snapshot(events_);
}

std::vector<store_event> tiered_block_store::drain_events() {
  auto out = events_.drain();
  // The tiers name int8 blocks by tier_key; readers (the router's index)
  // know the caller's namespace.
  if (opts_.tier_codec == block_codec::int8)
    for (auto& e : out)
      e.ns ^= int8_namespace_tag;
  return out;
}

store_stats tiered_block_store::stats() const {
  store_stats s;
  s.host = host_.stats();
  if (disk_)
    s.disk = disk_->stats();
  s.puts = puts_.load();
  s.put_rejects = put_rejects_.load();
  s.spills = spills_.load();
  s.spill_skips = spill_skips_.load();
  s.spill_drops = spill_drops_.load();
  s.spill_failures = spill_failures_.load();
  s.spill_queue_blocks = queue_.blocks();
  s.spill_queue_bytes = queue_.bytes();
  s.spill_queue_hits = queue_hits_.load();
  s.promotions = promotions_.load();
  s.promotion_skips = promotion_skips_.load();
  s.events_dropped = events_.dropped();
  s.int8_blocks = int8_blocks_.load();
  s.int8_refused = int8_refused_.load();
  s.decode_failures = decode_failures_.load();
  s.disk_resets = disk_report_.result == disk_open_report::outcome::reset ? 1 : 0;
  s.disk_disabled = disk_report_.result == disk_open_report::outcome::disabled ? 1 : 0;
  return s;
}

bool tiered_block_store::wait_spilled(std::chrono::milliseconds timeout) const {
  return queue_.wait_empty(timeout);
}

void tiered_block_store::set_spill_paused(bool paused) { queue_.set_paused(paused); }

} // namespace tessera::kvstore
