#include "kvstore/tiered_block_store.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

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

bool tiered_block_store::promote(const block_key& key, const stored_block& b,
                                 std::vector<block_key>* evicted) {
  // A read never waits for writes: with the spill queue full, what the
  // promotion would evict could not be spilled without waiting, so the
  // block is served from where it is and stays there.
  if (disk_ && !queue_.has_space(b.payload_bytes())) {
    ++promotion_skips_;
    return false;
  }
  auto r = host_.insert(key, b);
  for (auto& e : r.evicted) {
    if (evicted)
      evicted->push_back(e.key);
    spill(e.key, std::move(e.block));
  }
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
  if (opts_.tier_codec == block_codec::int8) {
    // A block of an int8 pool is int8 already and kept as it is: stored
    // as int8, not refused.
    const bool int8 = b.meta.codec == block_codec::int8 || b.meta.layout.kv_dtype == engine::dtype::i8;
    ++(int8 ? int8_blocks_ : int8_refused_);
  }
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

prefix_read tiered_block_store::get_prefix(uint64_t caller_ns, std::span<const engine::kv_block_hash> chain,
                                           uint64_t max_bytes) {
  const uint64_t ns = tier_key(block_key{caller_ns, 0}).ns;
  std::vector<block_key> keys;
  keys.reserve(chain.size());
  for (auto h : chain)
    keys.push_back(block_key{ns, h});
  // The tiers' blocks, as held (quantized for int8 tiers).
  std::vector<block_hit> got;
  uint64_t bytes = 0;
  bool more = false;
  auto fits = [&](const stored_block& b) { return got.empty() || bytes + b.payload_bytes() <= max_bytes; };
  auto take = [&](kv_tier t, stored_block b) {
    bytes += b.payload_bytes();
    got.push_back(block_hit{t, std::move(b)});
  };
  // One look at host memory for the whole chain. Host hits are marked used
  // a run at a time, so the LRU order is the one get() block by block
  // leaves; a block a promotion evicts further down the chain is looked for
  // below host memory, as get() would.
  auto held = host_.peek(keys);
  std::vector<block_key> host_used;
  size_t host_misses = 0;
  std::vector<block_key> evicted;
  std::unordered_map<block_key, size_t, block_key_hasher> held_at; // made at the first eviction
  auto forget_evicted = [&](size_t from) {
    if (evicted.empty())
      return;
    if (held_at.empty())
      for (size_t t = from; t < keys.size(); ++t)
        if (held[t])
          held_at.emplace(keys[t], t);
    for (const auto& e : evicted)
      if (auto it = held_at.find(e); it != held_at.end() && it->second >= from)
        held[it->second].reset();
    evicted.clear();
  };
  size_t i = 0;
  while (i < keys.size()) {
    bool corrupt = false;
    if (held[i]) {
      if (!fits(*held[i])) {
        more = true;
        break;
      }
      if (verify_block(*held[i])) {
        host_used.push_back(keys[i]);
        take(kv_tier::host, std::move(*held[i]));
        ++i;
        continue;
      }
      host_.drop_unverified(keys[i], held[i]->payload); // counted as a host miss there
      held[i].reset();
      corrupt = true;
    }
    if (!disk_) {
      host_misses += corrupt ? 0 : 1;
      break;
    }
    host_.mark_read(host_used, host_misses);
    host_used.clear();
    host_misses = 0;
    // A run of blocks the host lacks: [i, j).
    size_t j = i + 1;
    while (j < keys.size() && !held[j])
      ++j;
    const auto run = std::span{keys}.subspan(i, j - i);
    // Blocks on their way to disk are still in memory; the rest is read
    // from disk in one go, up to the first the disk lacks.
    std::vector<std::optional<stored_block>> queued(run.size());
    std::vector<block_key> on_disk;
    const bool queue_holds = queue_.blocks() > 0;
    for (size_t t = 0; t < run.size(); ++t) {
      if (queue_holds)
        if (auto b = queue_.find(run[t]); b && verify_block(*b)) {
          queued[t] = std::move(*b);
          continue;
        }
      on_disk.push_back(run[t]);
    }
    const uint64_t budget = got.empty() ? max_bytes : max_bytes - std::min(bytes, max_bytes);
    auto read = on_disk.empty() ? rocksdb_tier::run_read{} : disk_->get_run(on_disk, budget);
    size_t d = 0;
    bool whole = true;
    for (size_t t = 0; t < run.size(); ++t) {
      host_misses += (t == 0 && corrupt) ? 0 : 1;
      std::optional<stored_block> b;
      kv_tier tier = kv_tier::host;
      if (queued[t]) {
        b = std::move(queued[t]);
      } else if (d < read.blocks.size()) {
        b = std::move(read.blocks[d++]);
        tier = kv_tier::disk;
      } else {
        more = read.cut; // stopped at the byte bound, not at a gap
        whole = false;
        break;
      }
      if (!fits(*b)) {
        more = true;
        whole = false;
        break;
      }
      if (tier == kv_tier::host) {
        ++queue_hits_;
        promote(run[t], *b, &evicted);
      } else if (promote(run[t], *b, &evicted)) {
        ++promotions_;
      }
      take(tier, std::move(*b));
    }
    forget_evicted(j);
    if (!whole)
      break;
    i = j;
  }
  host_.mark_read(host_used, host_misses);

  prefix_read out;
  out.more = more;
  out.hits.reserve(got.size());
  uint64_t out_bytes = 0;
  for (auto& h : got) {
    auto b = decode(std::move(h.block));
    if (!b) {
      out.more = false;
      break;
    }
    if (!out.hits.empty() && out_bytes + b->payload_bytes() > max_bytes) {
      out.more = true;
      break;
    }
    out_bytes += b->payload_bytes();
    out.hits.push_back(block_hit{h.tier, std::move(*b)});
  }
  return out;
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
