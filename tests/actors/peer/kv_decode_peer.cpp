// The decode side of the cross-process KV hand-off test, as its own
// process: an engine on the model in argv[1], its KV pool registered with a
// UCX transport, a bridge (node "decode"), and a decode actor (published
// as "decode") that grants, verifies, commits and decodes hand-offs.
//
//   kv_decode_peer MODEL_DIR TLS
//
// Prints "LISTENING host:port" once ready; exits 0 on SIGTERM.

#include <csignal>
#include <cstdio>
#include <map>
#include <memory>

#include <caf/all.hpp>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/common/kv_handoff.hpp"
#include "common/error.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/engine_errc.hpp"
#include "engine/weights.hpp"
#include "tests/actors/kv_decode_peer.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace {

using namespace tessera;
using namespace tessera::actors;
namespace wire = transport::wire;

struct decode_state {
  engine::engine* eng = nullptr;
  transport::region_id pool_region = 0;
  std::map<uint64_t, wire::kv_grant> grants;
};

test::kv_decode_actor::behavior_type
decode_fn(test::kv_decode_actor::stateful_pointer<decode_state> self, engine::engine* eng,
          transport::region_id pool_region) {
  self->state.eng = eng;
  self->state.pool_region = pool_region;
  return {
    [self](handoff_atom, const wire::request_handoff& h) -> caf::result<wire::kv_grant> {
      auto g = grant_handoff(*self->state.eng, h, self->state.pool_region);
      if (!g)
        return g.error();
      self->state.grants[g->request_id] = *g;
      return *g;
    },
    [self](commit_atom, const wire::kv_transfer_batch& d) -> caf::result<wire::token_chunk> {
      auto it = self->state.grants.find(d.request_id);
      if (it == self->state.grants.end())
        return engine::make_engine_error(engine::engine_errc::unknown_request,
                                         "no grant for request " + std::to_string(d.request_id));
      auto grant = it->second;
      self->state.grants.erase(it);
      if (auto err = commit_handoff(*self->state.eng, grant, d))
        return err;
      wire::token_chunk all;
      all.id = d.request_id;
      auto& eng = *self->state.eng;
      while (eng.has_unfinished())
        for (auto& o : eng.step()) {
          all.tokens.insert(all.tokens.end(), o.tokens.begin(), o.tokens.end());
          all.logprobs.insert(all.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
          all.finish = o.finish;
          all.prompt_tokens = o.prompt_tokens;
          all.cached_prompt_tokens = o.cached_prompt_tokens;
          all.output_tokens = o.output_tokens;
        }
      return all;
    },
  };
}

int fail(const std::string& what) {
  std::fprintf(stderr, "kv_decode_peer: %s\n", what.c_str());
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4)
    return fail("usage: kv_decode_peer MODEL_DIR TLS [CLUSTER_SECRET]");
  // SIGTERM is taken by sigwait below, not by the default action.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  auto weights = engine::load_model_weights(argv[1]);
  if (!weights)
    return fail(error_text(weights.error()));
  engine::cpu::cpu_backend_options bo;
  bo.threads = 1;
  bo.num_blocks = 128;
  auto be = engine::cpu::make_cpu_backend(std::move(*weights), bo);
  if (!be)
    return fail(error_text(be.error()));
  engine::engine_config ec;
  ec.hash_key = test::peer_hash_key;
  engine::engine eng(std::move(*be), ec);

  transport::transport_options to;
  to.peer_timeout = std::chrono::milliseconds{3000};
  // argv[3]: a cluster secret: the handshake, sessions and memory by grant.
  if (argc == 4) {
    to.cluster_secret = argv[3];
    to.identity = "decode";
    to.grants_only = true;
  }
  transport::ucx_options uo;
  uo.tls = argv[2];
  uo.peer_error_handling = uo.tls == "tcp";
  auto tr = transport::ucx_transport::make(to, uo);
  if (!tr)
    return fail(error_text(tr.error()));

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto protocol = std::make_shared<bridge_protocol>();
  protocol->add<test::kv_decode_actor>();
  {
    bridge br(sys, std::move(*tr), bridge_config{"decode", protocol, std::chrono::seconds{30}, {}});
    auto region = br.register_region(eng.get_backend().kv_pool_memory());
    if (!region)
      return fail(error_text(region.error()));
    auto addr = br.transport().listen("127.0.0.1:0");
    if (!addr)
      return fail(error_text(addr.error()));
    auto decoder = sys.spawn<caf::detached>(decode_fn, &eng, *region);
    caf::anon_send(br.actor(), publish_atom_v, std::string{"decode"},
                   caf::actor_cast<caf::actor>(decoder));
    std::printf("LISTENING %s\n", addr->c_str());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    caf::anon_send_exit(decoder, caf::exit_reason::user_shutdown);
  }
  return 0;
}
