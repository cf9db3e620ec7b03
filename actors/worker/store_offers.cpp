#include "actors/worker/store_offers.hpp"

namespace tessera::actors {

std::optional<uint64_t> store_offers::sent(uint64_t bytes) {
  if (bytes == 0 || bytes > room())
    return std::nullopt;
  const auto ticket = next_ticket_++;
  offers_.emplace(ticket, bytes);
  in_flight_ += bytes;
  return ticket;
}

bool store_offers::settle(uint64_t ticket) {
  auto it = offers_.find(ticket);
  if (it == offers_.end())
    return false;
  in_flight_ -= it->second;
  offers_.erase(it);
  return true;
}

bool store_offers::answered(uint64_t ticket, uint64_t stored) {
  if (!settle(ticket))
    return false;
  stored_ += stored;
  return true;
}

bool store_offers::failed(uint64_t ticket) {
  return settle(ticket);
}

} // namespace tessera::actors
