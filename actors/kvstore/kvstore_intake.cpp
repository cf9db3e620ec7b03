#include "actors/kvstore/kvstore_intake.hpp"

#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "kvstore/block.hpp"

namespace tessera::actors {

namespace {

namespace wire = transport::wire;

std::string layout_text(const engine::kv_layout& l) {
  return std::to_string(l.num_layers) + " layers x " + std::to_string(l.num_kv_heads) + " kv heads x " +
         std::to_string(l.head_dim) + " dims, " + std::to_string(l.block_tokens) + " tokens/block, " +
         std::string{protocol::to_safetensors_name(l.kv_dtype)};
}

caf::error refused(const std::string& why) {
  return caf::make_error(caf::sec::invalid_argument, "kv store offer refused: " + why);
}

struct intake_state {
  static inline const char* name = "kvstore-intake";
  kvstore_intake_config cfg;
  uint64_t in_flight = 0;
};

using intake_pointer = kvstore_intake_actor::stateful_pointer<intake_state>;

void count(intake_pointer self, const char* result, size_t blocks) {
  if (!self->state.cfg.metrics || blocks == 0)
    return;
  self->state.cfg.metrics
    ->counter("tessera_kvstore_remote_offer_blocks_total",
              "Blocks workers of other nodes offered this node's kv store, by result: stored, held (the store "
              "had them), refused (a bad offer), busy (too much waiting for the writer: dropped), failed (the "
              "writer failed or timed out).",
              {{"result", result}})
    .inc(static_cast<double>(blocks));
}

kvstore_intake_actor::behavior_type intake_fn(intake_pointer self, kvstore_intake_config cfg) {
  self->state.cfg = std::move(cfg);
  return {
    [self](offer_atom, const wire::kv_fetch_reply& m) -> caf::result<void> {
      auto& st = self->state;
      auto offer = offer_from_wire(m, st.cfg.ns, st.cfg.layout);
      if (!offer) {
        count(self, "refused", m.blocks.size());
        spdlog::warn("kvstore intake: {}", error_text(offer.error()));
        return offer.error();
      }
      const auto bytes = offer->payload_bytes();
      const auto blocks = offer->blocks.size();
      if (st.in_flight + bytes > st.cfg.max_bytes_in_flight) {
        count(self, "busy", blocks);
        return caf::make_error(caf::sec::request_receiver_down,
                               "kv store busy: " + std::to_string(st.in_flight) +
                                 " bytes of offers wait for its writer; offer dropped");
      }
      st.in_flight += bytes;
      offer->deadline = std::chrono::steady_clock::now() + st.cfg.write_timeout;
      auto rp = self->make_response_promise<caf::unit_t>();
      self->request(st.cfg.writer, st.cfg.write_timeout, offer_atom_v, std::move(*offer))
        .then(
          [self, rp, bytes, blocks](uint64_t stored) mutable {
            self->state.in_flight -= bytes;
            count(self, "stored", stored);
            count(self, "held", blocks > stored ? blocks - stored : 0);
            rp.deliver(caf::unit);
          },
          [self, rp, bytes, blocks](caf::error& err) mutable {
            self->state.in_flight -= bytes;
            count(self, "failed", blocks);
            rp.deliver(std::move(err));
          });
      return rp;
    },
  };
}

} // namespace

caf::expected<kv_offer> offer_from_wire(const wire::kv_fetch_reply& m, uint64_t ns, const engine::kv_layout& layout) {
  if (m.busy || m.more)
    return refused("an offer sets neither busy nor more");
  if (m.blocks.empty())
    return refused("it holds no block");
  if (!(m.layout == layout))
    return refused("its layout (" + layout_text(m.layout) + ") is not the store's (" + layout_text(layout) + ")");
  kv_offer out;
  out.ns = ns;
  out.blocks.reserve(m.blocks.size());
  const auto bytes = layout.block_bytes();
  for (size_t i = 0; i < m.blocks.size(); ++i) {
    const auto& b = m.blocks[i];
    const auto at = "block " + std::to_string(i);
    if (b.token_count != layout.block_tokens)
      return refused(at + " holds " + std::to_string(b.token_count) + " tokens; only full blocks of " +
                     std::to_string(layout.block_tokens) + " are stored");
    if (b.data.size() != bytes)
      return refused(at + " has " + std::to_string(b.data.size()) + " bytes; the layout's block has " +
                     std::to_string(bytes));
    if (kvstore::payload_checksum(b.data.data(), b.data.size()) != b.checksum)
      return refused(at + "'s bytes do not match its checksum");
    out.blocks.push_back({b.hash, kvstore::make_block(layout, b.token_count, b.data)});
  }
  return out;
}

kvstore_intake_actor spawn_kvstore_intake(caf::actor_system& sys, kvstore_intake_config cfg) {
  return sys.spawn(intake_fn, std::move(cfg));
}

} // namespace tessera::actors
