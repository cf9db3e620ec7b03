#include "transport/transport.hpp"

namespace tessera::transport {

caf::expected<grant_id> transport::grant(peer_id, std::vector<memory_range>) {
  return next_grant_.fetch_add(1);
}

void transport::revoke(grant_id) {}

std::string transport::peer_identity(peer_id) const {
  return {};
}

std::vector<std::pair<std::string, uint64_t>> transport::rejections() const {
  return {};
}

} // namespace tessera::transport
