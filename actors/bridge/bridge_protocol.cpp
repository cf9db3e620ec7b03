#include "actors/bridge/bridge_protocol.hpp"

#include "transport/transport_errc.hpp"

namespace tessera::actors {

namespace {

template <class... Ts>
std::optional<wire::wire_message> element_as_wire(const caf::message& msg, size_t i,
                                                  std::variant<Ts...>*) {
  std::optional<wire::wire_message> out;
  ((!out && !std::is_same_v<Ts, wire::envelope> && msg.match_element<Ts>(i)
      ? (out = msg.get_as<Ts>(i), true)
      : false),
   ...);
  return out;
}

template <class... Ts>
bool element_is_wire(const caf::message& msg, size_t i, std::variant<Ts...>*) {
  return ((!std::is_same_v<Ts, wire::envelope> && msg.match_element<Ts>(i)) || ...);
}

} // namespace

const bridge_operation* bridge_protocol::find(const std::string& name,
                                              std::optional<wire::message_type> arg) const {
  for (const auto& op : ops_)
    if (op.name == name && op.arg == arg)
      return &op;
  return nullptr;
}

void bridge_protocol::add_operation(bridge_operation op) {
  if (find(op.name, op.arg) == nullptr)
    ops_.push_back(std::move(op));
}

caf::error bridge_protocol::check(const caf::message& msg) {
  auto refuse = [&](const std::string& why) {
    return transport::make_transport_error(transport::transport_errc::invalid_message,
                                           "bridge: cannot send " + caf::to_string(msg) +
                                             " to another node: " + why);
  };
  if (msg.empty() || msg.size() > 2 || !msg.match_element<caf::atom_value>(0))
    return refuse("a bridged message is (atom) or (atom, wire message)");
  if (msg.size() == 2 && !element_is_wire(msg, 1, static_cast<wire::wire_message*>(nullptr)))
    return refuse("its argument is not a wire message");
  return {};
}

caf::expected<wire_call> bridge_protocol::to_wire(const caf::message& msg) {
  if (auto err = check(msg))
    return err;
  wire_call call;
  call.operation = caf::to_string(msg.get_as<caf::atom_value>(0));
  if (msg.size() == 2)
    call.arg = element_as_wire(msg, 1, static_cast<wire::wire_message*>(nullptr));
  return call;
}

caf::message bridge_protocol::to_message(std::optional<wire::wire_message> reply) {
  if (!reply)
    return caf::make_message();
  return std::visit([](auto& x) { return caf::make_message(std::move(x)); }, *reply);
}

} // namespace tessera::actors
