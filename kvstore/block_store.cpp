#include "kvstore/block_store.hpp"

namespace tessera::kvstore {

prefix_read block_store::get_prefix(uint64_t ns, std::span<const engine::kv_block_hash> chain,
                                    uint64_t max_bytes) {
  prefix_read out;
  uint64_t bytes = 0;
  for (auto h : chain) {
    auto hit = get({ns, h});
    if (!hit)
      break;
    if (!out.hits.empty() && bytes + hit->block.payload_bytes() > max_bytes) {
      out.more = true;
      break;
    }
    bytes += hit->block.payload_bytes();
    out.hits.push_back(std::move(*hit));
  }
  return out;
}

} // namespace tessera::kvstore
