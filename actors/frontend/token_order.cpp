#include "actors/frontend/token_order.hpp"

namespace tessera::actors::frontend {

namespace {

int32_t first_index(const engine::request_output& out) {
  return out.output_tokens - static_cast<int32_t>(out.tokens.size());
}

} // namespace

std::vector<engine::request_output> token_order::accept(engine::request_output out) {
  std::vector<engine::request_output> ready;
  const auto first = first_index(out);
  if (first < received_ || (first == received_ && out.tokens.empty() &&
                            out.finish == engine::finish_reason::none))
    return ready; // a duplicate, or nothing new
  early_.emplace(first, std::move(out));
  while (!early_.empty() && early_.begin()->first == received_) {
    auto node = early_.extract(early_.begin());
    received_ += static_cast<int32_t>(node.mapped().tokens.size());
    ready.push_back(std::move(node.mapped()));
  }
  return ready;
}

} // namespace tessera::actors::frontend
