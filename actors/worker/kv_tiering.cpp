#include "actors/worker/kv_tiering.hpp"

#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/error.hpp"

namespace tessera::actors {

size_t fetch_prefix(engine::engine& eng, kvstore::block_store& store, std::span<const int32_t> prompt,
                    std::string_view cache_salt) {
  if (prompt.size() < 2)
    return 0;
  const auto& layout = eng.get_backend().layout();
  const auto hashes = eng.block_hashes(prompt.first(prompt.size() - 1), cache_salt);
  const size_t had = eng.cached_prefix_blocks(hashes);
  if (had == hashes.size())
    return 0;
  const size_t now = eng.extend_cached_prefix(hashes, [&](size_t i, std::span<std::byte> out) {
    auto hit = store.get({eng.hash_seed(), hashes[i]});
    if (!hit || !(hit->block.meta.layout == layout) || hit->block.payload_bytes() != out.size())
      return false;
    std::memcpy(out.data(), hit->block.payload->data(), out.size());
    return true;
  });
  return now > had ? now - had : 0;
}

size_t offer_sequence(engine::engine& eng, kvstore::block_store& store, std::span<const int32_t> tokens,
                      std::string_view cache_salt) {
  if (tokens.size() < 2)
    return 0;
  const auto& layout = eng.get_backend().layout();
  const auto hashes = eng.block_hashes(tokens.first(tokens.size() - 1), cache_salt);
  size_t offered = 0;
  for (auto h : hashes) {
    const kvstore::block_key key{eng.hash_seed(), h};
    if (store.contains(key))
      continue;
    std::vector<std::byte> bytes(layout.block_bytes());
    if (!eng.read_cached_block(h, bytes))
      break;
    if (auto err = store.put(key, kvstore::make_block(layout, layout.block_tokens, std::move(bytes)))) {
      spdlog::warn("kv store refused a block: {}", error_text(err));
      break;
    }
    ++offered;
  }
  return offered;
}

} // namespace tessera::actors
