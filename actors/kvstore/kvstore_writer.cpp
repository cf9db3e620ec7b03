#include "actors/kvstore/kvstore_writer.hpp"

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

kvstore_writer_actor::behavior_type writer_fn(kvstore_writer_actor::pointer self,
                                              std::weak_ptr<kvstore::block_store> store) {
  return {
    [store](offer_atom, const kv_offer& o) -> caf::result<uint64_t> {
      if (std::chrono::steady_clock::now() > o.deadline)
        return caf::make_error(caf::sec::request_timeout, "the offer expired before the kv store writer reached it");
      auto s = store.lock();
      return s ? put_offer(*s, o) : uint64_t{0};
    },
    [self](stop_atom) { self->quit(); },
  };
}

} // namespace

kvstore_writer_actor spawn_kvstore_writer(caf::actor_system& sys, std::weak_ptr<kvstore::block_store> store) {
  return sys.spawn<caf::detached>(writer_fn, std::move(store));
}

} // namespace tessera::actors
