#include "actors/bridge/region_table.hpp"

#include <cstring>
#include <string>

#include "transport/transport_errc.hpp"

namespace tessera::actors::detail {

void region_table::add(transport::region_id id, std::span<std::byte> memory) {
  std::lock_guard lock{mu_};
  regions_[id] = memory;
}

caf::error region_table::copy(const transport::transfer_batch& batch) const {
  std::lock_guard lock{mu_};
  auto range = [&](transport::region_id id, uint64_t offset,
                   uint64_t size) -> std::byte* {
    auto it = regions_.find(id);
    if (it == regions_.end() || offset > it->second.size() || size > it->second.size() - offset)
      return nullptr;
    return it->second.data() + offset;
  };
  for (size_t i = 0; i < batch.blocks.size(); ++i) {
    const auto& b = batch.blocks[i];
    if (!range(b.src, b.src_offset, b.size) || !range(b.dst, b.dst_offset, b.size))
      return transport::make_transport_error(
        transport::transport_errc::invalid_message,
        "bridge: block " + std::to_string(i) + " of batch " + std::to_string(batch.batch_id) +
          " lies outside this node's regions " + std::to_string(b.src) + " -> " +
          std::to_string(b.dst));
  }
  for (const auto& b : batch.blocks)
    std::memmove(range(b.dst, b.dst_offset, b.size), range(b.src, b.src_offset, b.size), b.size);
  return {};
}

} // namespace tessera::actors::detail
