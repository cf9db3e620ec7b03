#pragma once
/// @file
/// Which messages may cross a process through the bridge, and how a call
/// that arrived from another node is made on a local actor.
///
/// A message crosses as (atom) or (atom, wire message): the atom's text is
/// the envelope's operation and the wire message (transport/wire) its
/// payload. The reply is nothing (reacts_to, or replies_to...with<void>)
/// or one wire message. The receiving bridge only runs operations that the
/// published actor's typed interface declares: a bridge_protocol is built
/// from those interfaces (add<Handle>()), and an envelope naming anything
/// else is answered with an error, never delivered.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <caf/all.hpp>

#include "actors/actor_types.hpp"
#include "common/assert.hpp"
#include "transport/wire/messages.hpp"

namespace tessera::actors {

namespace wire = transport::wire;

/// A message split for the wire: its operation and optional argument.
struct wire_call {
  std::string operation;
  std::optional<wire::wire_message> arg;
};

/// The reply of a call: nothing, one wire message, or an error.
using wire_reply = caf::expected<std::optional<wire::wire_message>>;

/// Runs a call on a local actor. `want_reply` false: sent one-way and
/// `done` is never called; else requested with `timeout` and `done` gets
/// the reply or the error.
using wire_invoker =
  std::function<void(caf::event_based_actor* self, const caf::actor& dest,
                     std::optional<wire::wire_message> arg, bool want_reply,
                     std::chrono::milliseconds timeout, std::function<void(wire_reply)> done)>;

/// One operation a typed interface declares.
struct bridge_operation {
  std::string name;
  /// Argument kind; nullopt for an atom-only message.
  std::optional<wire::message_type> arg;
  wire_invoker invoke;
};

namespace detail {

template <class T, class Variant>
struct variant_index;

template <class T, class... Ts>
struct variant_index<T, std::variant<Ts...>> {
  static constexpr size_t value = [] {
    constexpr bool same[] = {std::is_same_v<T, Ts>...};
    for (size_t i = 0; i < sizeof...(Ts); ++i)
      if (same[i])
        return i;
    return sizeof...(Ts);
  }();
  static constexpr bool found = value < sizeof...(Ts);
};

template <class T>
constexpr bool is_wire_payload =
  variant_index<T, wire::wire_message>::found && !std::is_same_v<T, wire::envelope>;

template <class T>
constexpr wire::message_type message_type_of() {
  return static_cast<wire::message_type>(variant_index<T, wire::wire_message>::value + 1);
}

template <class Sig>
struct signature_traits {
  static_assert(!std::is_same_v<Sig, Sig>,
                "a bridged interface's signatures must be (atom) or (atom, wire message)");
};

template <caf::atom_value Atom, class... Args, class... Outs>
struct signature_traits<
  caf::typed_mpi<caf::detail::type_list<caf::atom_constant<Atom>, Args...>, caf::output_tuple<Outs...>>> {
  static_assert(sizeof...(Args) <= 1, "a bridged message carries at most one wire message");
  static_assert((is_wire_payload<Args> && ...),
                "a bridged message's argument must be a wire message (transport/wire/messages.hpp)");
  static_assert(sizeof...(Outs) == 1, "a bridged reply is void or one wire message");
  using out = std::tuple_element_t<0, std::tuple<Outs...>>;
  static_assert(std::is_void_v<out> || is_wire_payload<out>,
                "a bridged reply must be void or a wire message");

  static bridge_operation make() {
    bridge_operation op;
    op.name = caf::to_string(Atom);
    if constexpr (sizeof...(Args) == 1)
      op.arg = message_type_of<std::tuple_element_t<0, std::tuple<Args...>>>();
    op.invoke = [](caf::event_based_actor* self, const caf::actor& dest,
                   std::optional<wire::wire_message> arg, bool want_reply,
                   std::chrono::milliseconds timeout, std::function<void(wire_reply)> done) {
      auto call = [&](auto&&... xs) {
        if (!want_reply) {
          self->send(dest, caf::atom_constant<Atom>::value, std::move(xs)...);
          return;
        }
        auto on_error = [done](caf::error& err) { done(std::move(err)); };
        if constexpr (std::is_void_v<out>)
          self->request(dest, timeout, caf::atom_constant<Atom>::value, std::move(xs)...)
            .then([done]() { done(std::optional<wire::wire_message>{}); }, on_error);
        else
          self->request(dest, timeout, caf::atom_constant<Atom>::value, std::move(xs)...)
            .then([done](out& r) { done(std::optional<wire::wire_message>{std::move(r)}); },
                  on_error);
      };
      if constexpr (sizeof...(Args) == 1) {
        // The bridge found this operation by its argument's type.
        using arg_type = std::tuple_element_t<0, std::tuple<Args...>>;
        auto* x = arg ? std::get_if<arg_type>(&*arg) : nullptr;
        TESSERA_ASSERT(x != nullptr, "bridge: operation called with the wrong argument");
        call(std::move(*x));
      } else {
        call();
      }
    };
    return op;
  }
};

} // namespace detail

/// The operations published actors accept from other nodes. Build it once
/// at start-up; read-only (and so thread-safe) afterwards.
class bridge_protocol {
public:
  /// Adds every signature of the typed interface `Handle`; each must be
  /// (atom) or (atom, wire message) replying void or one wire message
  /// (checked at compile time).
  template <class Handle>
  bridge_protocol& add() {
    add_signatures(static_cast<typename Handle::signatures*>(nullptr));
    return *this;
  }

  /// The operation `name` taking `arg`, or null when no interface declares it.
  [[nodiscard]] const bridge_operation* find(const std::string& name,
                                             std::optional<wire::message_type> arg) const;

  /// Checks, without copying anything, that `msg` can cross a process:
  /// (atom) or (atom, wire message other than an envelope). Errors:
  /// invalid_message naming what is wrong.
  [[nodiscard]] static caf::error check(const caf::message& msg);

  /// Splits `msg` into operation and argument (a copy). Errors as check().
  [[nodiscard]] static caf::expected<wire_call> to_wire(const caf::message& msg);

  /// The CAF message of a reply received from another node.
  [[nodiscard]] static caf::message to_message(std::optional<wire::wire_message> reply);

private:
  template <class... Sigs>
  void add_signatures(caf::detail::type_list<Sigs...>*) {
    (add_operation(detail::signature_traits<Sigs>::make()), ...);
  }
  void add_operation(bridge_operation op);

  std::vector<bridge_operation> ops_;
};

} // namespace tessera::actors
