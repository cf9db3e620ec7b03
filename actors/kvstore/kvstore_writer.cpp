#include "actors/kvstore/kvstore_writer.hpp"

#include <optional>

#include <spdlog/spdlog.h>

#include "common/error.hpp"

namespace tessera::actors {

uint64_t kv_offer::payload_bytes() const {
  uint64_t n = 0;
  for (const auto& b : blocks)
    n += b.block.payload_bytes();
  return n;
}

uint64_t put_offer(kvstore::block_store& store, const kv_offer& o) {
  uint64_t stored = 0;
  for (const auto& b : o.blocks) {
    const kvstore::block_key key{o.ns, b.hash};
    // Another worker (or an earlier turn) may have stored it since the
    // offer was copied: a put would only mark it used.
    if (store.contains(key))
      continue;
    if (auto err = store.put(key, b.block)) {
      // The chain is only useful up to its first gap: the rest would be
      // unreachable by a prefix lookup.
      spdlog::warn("kv store refused a block: {}", error_text(err));
      break;
    }
    ++stored;
  }
  return stored;
}

namespace {

/// What a stopping writer keeps: until when it still writes, and what it
/// dropped after that.
struct writer_stop {
  std::optional<caf::timestamp> write_until;
  uint64_t dropped_offers = 0;
  uint64_t dropped_blocks = 0;
};

kvstore_writer_actor::behavior_type writer_fn(kvstore_writer_actor::pointer self,
                                              std::weak_ptr<kvstore::block_store> store) {
  auto stopping = std::make_shared<writer_stop>();
  return {
    [store, stopping](offer_atom, const kv_offer& o) -> caf::result<uint64_t> {
      if (std::chrono::steady_clock::now() > o.deadline)
        return caf::make_error(caf::sec::request_timeout, "the offer expired before the kv store writer reached it");
      if (stopping->write_until && caf::make_timestamp() > *stopping->write_until) {
        ++stopping->dropped_offers;
        stopping->dropped_blocks += o.blocks.size();
        return caf::make_error(caf::sec::request_timeout, "the kv store is stopping");
      }
      auto s = store.lock();
      return s ? put_offer(*s, o) : uint64_t{0};
    },
    [self, stopping](stop_atom) {
      if (stopping->dropped_offers > 0)
        spdlog::info("kv store writer: stopping, {} queued offers ({} blocks) left unwritten",
                     stopping->dropped_offers, stopping->dropped_blocks);
      self->quit();
    },
    [self, stopping](stop_atom, caf::timestamp until) {
      if (!stopping->write_until) {
        stopping->write_until = until;
        self->send(self, stop_atom_v); // behind the offers already queued
      }
    },
  };
}

} // namespace

kvstore_writer_actor spawn_kvstore_writer(caf::actor_system& sys, std::weak_ptr<kvstore::block_store> store) {
  return sys.spawn<caf::detached>(writer_fn, std::move(store));
}

} // namespace tessera::actors
