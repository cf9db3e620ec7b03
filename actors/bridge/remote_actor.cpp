#include "actors/bridge/remote_actor.hpp"

namespace tessera::actors {

caf::actor spawn_remote_proxy(caf::actor_system& sys, const bridge_actor& bridge,
                              std::string node, std::string name) {
  return sys.spawn([bridge, node = std::move(node),
                    name = std::move(name)](caf::event_based_actor* self) -> caf::behavior {
    // Every message goes to the bridge with the original sender and
    // request id, so the remote reply (or error) reaches the caller.
    self->set_default_handler(
      [self, bridge, node, name](caf::scheduled_actor*,
                                 caf::message_view& xs) -> caf::result<caf::message> {
        return self->delegate(bridge, forward_atom_v, node, name, xs.move_content_to_message());
      });
    // A behaviour that matches nothing ordinary keeps the actor alive.
    return {[](caf::exit_msg&) {}};
  });
}

} // namespace tessera::actors
