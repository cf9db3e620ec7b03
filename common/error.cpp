#include "common/error.hpp"

#include <caf/message.hpp>

namespace tessera {

std::string error_message(const caf::error& err) {
  if (!err)
    return {};
  const auto& ctx = err.context();
  for (size_t i = 0; i < ctx.size(); ++i)
    if (ctx.match_element<std::string>(i))
      return ctx.get_as<std::string>(i);
  return {};
}

std::string error_text(const caf::error& err) {
  if (!err)
    return "none";
  auto msg = error_message(err);
  std::string out = caf::to_string(err.category());
  if (msg.empty())
    return out + " error " + std::to_string(static_cast<int>(err.code()));
  return out + ": " + msg;
}

} // namespace tessera
