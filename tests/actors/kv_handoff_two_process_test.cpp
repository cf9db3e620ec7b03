// The KV hand-off across two processes over UCX: engine A (this process)
// prefills a prompt, its KV blocks go by RMA into engine B's pool in a peer
// process (kv_decode_peer), and B decodes the rest; the tokens (and
// logprobs) equal what one engine produces alone. Messages go through the
// bridge and a remote proxy, exactly as the serving layer's will.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/bridge/remote_actor.hpp"
#include "actors/common/kv_handoff.hpp"
#include "common/child_process.hpp"
#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "tests/actors/kv_decode_peer.hpp"
#include "tests/support/test_model.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

struct outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

engine::request make_request(uint64_t id, int prompt_len, float temperature) {
  std::mt19937_64 rng{id};
  engine::request r;
  r.id = id;
  for (int i = 0; i < prompt_len; ++i)
    r.prompt.push_back(static_cast<int32_t>(8 + rng() % 500));
  r.params.temperature = temperature;
  r.params.max_tokens = 16;
  r.params.ignore_eos = true;
  r.params.logprobs = 0;
  r.params.seed = 99 + id;
  return r;
}

void collect(outcome& out, const engine::request_output& o) {
  out.tokens.insert(out.tokens.end(), o.tokens.begin(), o.tokens.end());
  for (const auto& lp : o.logprobs)
    out.logprobs.push_back(lp.logprob);
}

outcome run_alone(engine::engine& eng, const engine::request& r) {
  outcome out;
  EXPECT_FALSE(eng.add_request(r));
  while (eng.has_unfinished())
    for (const auto& o : eng.step())
      collect(out, o);
  return out;
}

std::string peer_path() {
  return std::string{TESSERA_KV_DECODE_PEER};
}

class KvHandoffTwoProcessTest : public ::testing::TestWithParam<const char*> {
protected:
  KvHandoffTwoProcessTest() : sys(cfg), self(sys) {}

  void SetUp() override {
    // "<tls>" or "<tls>+secret": with a cluster secret, both sides
    // authenticate and every block lands only in the ranges decode's
    // bridge granted for the hand-off (rendezvous, no rkeys).
    const std::string param = GetParam();
    const bool secure = param.ends_with("+secret");
    const std::string tls = secure ? param.substr(0, param.size() - 7) : param;
    const std::string secret = "kv-handoff-test-secret-0123456789";
    std::vector<std::string> args{tessera::test::test_model_dir("nano").string(), tls};
    if (secure)
      args.push_back(secret);
    auto child = child_process::spawn(peer_path(), args, {.env = {"UCX_TCP_CM_REUSEADDR=y"}});
    ASSERT_TRUE(child) << error_text(child.error());
    peer = std::make_unique<child_process>(std::move(*child));
    auto line = peer->read_line(60s);
    ASSERT_TRUE(line) << error_text(line.error());
    ASSERT_EQ(line->rfind("LISTENING ", 0), 0u) << *line;
    address = line->substr(10);

    transport::transport_options to;
    to.peer_timeout = 3000ms;
    if (secure) {
      to.cluster_secret = secret;
      to.identity = "prefill";
      to.grants_only = true;
    }
    transport::ucx_options uo;
    uo.tls = tls;
    uo.peer_error_handling = tls == "tcp";
    auto tr = transport::ucx_transport::make(to, uo);
    ASSERT_TRUE(tr) << error_text(tr.error());
    auto protocol = std::make_shared<bridge_protocol>();
    br = std::make_unique<bridge>(sys, std::move(*tr), bridge_config{"prefill", protocol, 30s, {}});
    tessera::test::test_engine_options eo;
    eo.engine.hash_key = test::peer_hash_key;
    eo.backend.num_blocks = 64;
    eo.backend.threads = 1;
    prefill = tessera::test::make_test_engine("nano", eo);
    auto region = br->register_region(prefill->get_backend().kv_pool_memory());
    ASSERT_TRUE(region) << error_text(region.error());
    pool_region = *region;
    caf::error err;
    self->request(br->actor(), 10s, connect_atom_v, std::string{"decode"}, address)
      .receive([] {}, [&](caf::error& e) { err = e; });
    ASSERT_FALSE(err) << error_text(err);
    decode = remote_actor<test::kv_decode_actor>(sys, br->actor(), "decode", "decode");
  }

  void TearDown() override {
    br.reset();
    if (peer) {
      peer->kill(SIGTERM);
      auto code = peer->wait(10s);
      EXPECT_TRUE(code && *code == 0) << "the peer did not exit cleanly";
    }
  }

  /// Prefill here, hand off, decode there. `corrupt` flips a checksum.
  caf::expected<outcome> disaggregated(const engine::request& r, bool corrupt = false) {
    auto first = r;
    first.params.max_tokens = 1;
    first.keep_kv = true;
    outcome out = run_alone(*prefill, first);
    auto src = prefill->export_request_blocks(r.id);
    if (!src)
      return src.error();
    caf::expected<wire::kv_grant> grant{caf::error{}};
    self->request(decode, 10s, handoff_atom_v, make_handoff(r, *src))
      .receive([&](wire::kv_grant& g) { grant = std::move(g); },
               [&](caf::error& e) { grant = std::move(e); });
    if (!grant)
      return grant.error();
    auto puts = plan_puts(*prefill, *src, pool_region, *grant, r.id);
    if (!puts)
      return puts.error();
    if (corrupt)
      puts->descriptor.blocks.front().checksum ^= 1;
    caf::error err;
    self->request(br->actor(), 10s, transfer_atom_v, std::string{"decode"}, puts->batch)
      .receive([] {}, [&](caf::error& e) { err = e; });
    EXPECT_TRUE(prefill->release_request(r.id));
    if (err)
      return err;
    caf::expected<wire::token_chunk> tail{caf::error{}};
    self->request(decode, 30s, commit_atom_v, puts->descriptor)
      .receive([&](wire::token_chunk& c) { tail = std::move(c); },
               [&](caf::error& e) { tail = std::move(e); });
    if (!tail)
      return tail.error();
    collect(out, *tail);
    return out;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::unique_ptr<child_process> peer;
  std::string address;
  std::unique_ptr<bridge> br;
  std::unique_ptr<engine::engine> prefill;
  transport::region_id pool_region = 0;
  test::kv_decode_actor decode;
};

TEST_P(KvHandoffTwoProcessTest, DecodeInAnotherProcessEqualsOneEngine) {
  for (float temperature : {0.0f, 0.8f}) {
    for (int prompt_len : {53, 16, 5}) {
      const uint64_t id = static_cast<uint64_t>(prompt_len) + (temperature > 0 ? 1000 : 0);
      auto r = make_request(id, prompt_len, temperature);
      tessera::test::test_engine_options eo;
      eo.engine.hash_key = test::peer_hash_key;
      eo.backend.threads = 1;
      auto whole = run_alone(*tessera::test::make_test_engine("nano", eo), r);
      auto split = disaggregated(r);
      ASSERT_TRUE(split) << error_text(split.error());
      EXPECT_EQ(split->tokens, whole.tokens) << prompt_len << " tokens, t=" << temperature;
      EXPECT_EQ(split->logprobs, whole.logprobs) << prompt_len << " tokens, t=" << temperature;
      EXPECT_EQ(split->tokens.size(), 16u);
    }
  }
}

TEST_P(KvHandoffTwoProcessTest, ACorruptBlockIsRefusedAndTheRequestCanBeRetried) {
  auto r = make_request(7, 40, 0.0f);
  auto bad = disaggregated(r, true);
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error() == engine::engine_errc::kv_mismatch) << error_text(bad.error());
  EXPECT_NE(error_text(bad.error()).find("block 0 arrived with a checksum mismatch"),
            std::string::npos)
    << error_text(bad.error());
  // The receiver freed the reservation: the same request id goes through.
  auto good = disaggregated(r);
  ASSERT_TRUE(good) << error_text(good.error());
  tessera::test::test_engine_options eo;
  eo.engine.hash_key = test::peer_hash_key;
  eo.backend.threads = 1;
  EXPECT_EQ(good->tokens, run_alone(*tessera::test::make_test_engine("nano", eo), r).tokens);
}

INSTANTIATE_TEST_SUITE_P(Ucx, KvHandoffTwoProcessTest,
                         ::testing::Values("tcp+secret", "sm,self,tcp+secret", "sm,self,tcp"),
                         [](const auto& info) {
                           std::string p = info.param;
                           std::string name = p.starts_with("tcp") ? "tcp" : "shm";
                           return p.ends_with("+secret") ? name + "_secret" : name;
                         });

} // namespace
} // namespace tessera::actors
