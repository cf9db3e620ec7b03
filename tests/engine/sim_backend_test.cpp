// The sim backend under the real engine: deterministic tokens (greedy and
// seeded alike, across engines), the prefix cache and block accounting as
// with the cpu backend, KV hand-offs between two sim engines that continue
// exactly as one engine would (and differ when the KV bytes do not
// arrive), scaled KV payloads, ids the served tokenizer can decode, and the
// modelled time slept through an injected clock.
#include <map>
#include <utility>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/engine.hpp"
#include "engine/factory/backend_factory.hpp"
#include "engine/sim/sim_backend.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;

using result = test::run_result;
using test::drain;
using test::put_blocks;
using test::run_one;

model_config llama8b() {
  auto c = model_shape("llama3-8b");
  EXPECT_TRUE(c.has_value());
  return *c;
}

sim::sim_backend_options sim_opts(int32_t blocks = 512, int32_t payload_scale = 256) {
  sim::sim_backend_options o;
  o.settings.time_scale = 0;
  o.settings.payload_scale = payload_scale;
  o.num_blocks = blocks;
  return o;
}

std::unique_ptr<engine::engine> make_sim_engine(const model_config& cfg,
                                                sim::sim_backend_options o = sim_opts(),
                                                engine_config ec = {}) {
  auto be = sim::make_sim_backend(cfg, std::move(o));
  EXPECT_TRUE(be) << error_text(be.error());
  return std::make_unique<engine::engine>(std::move(*be), ec);
}

const sim::sim_backend& sim_of(const engine::engine& eng) {
  const auto* s = sim::as_sim_backend(eng.get_backend());
  EXPECT_NE(s, nullptr);
  return *s;
}

std::vector<int32_t> random_prompt(int n, uint64_t seed, int32_t vocab = 128000) {
  return test::random_prompt(n, seed, vocab);
}

request make_request(uint64_t id, std::vector<int32_t> prompt, int max_tokens = 12,
                     float temperature = 0, uint64_t seed = 7) {
  request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.params.temperature = temperature;
  r.params.max_tokens = max_tokens;
  r.params.logprobs = 0;
  r.params.seed = seed;
  return r;
}

TEST(SimBackendTest, GreedyAndSeededSamplingGiveTheSameTokensInAnyEngine) {
  const auto cfg = llama8b();
  auto a = make_sim_engine(cfg);
  auto b = make_sim_engine(cfg);
  for (int len : {1, 15, 16, 17, 100}) {
    auto prompt = random_prompt(len, static_cast<uint64_t>(len));
    auto greedy = run_one(*a, make_request(1, prompt));
    auto seeded = run_one(*b, make_request(2, prompt, 12, 0.8f, 1234));
    ASSERT_EQ(greedy.tokens.size(), 12u) << len;
    EXPECT_EQ(greedy.tokens, seeded.tokens) << len;
    EXPECT_EQ(greedy.finish, finish_reason::length) << "never EOS: the request runs to max_tokens";
    for (auto lp : greedy.logprobs)
      EXPECT_EQ(lp, 0.0f) << "the chosen token takes all the probability";
    for (auto t : greedy.tokens) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, cfg.vocab_size);
      EXPECT_NE(t, *cfg.bos_token_id);
      for (auto eos : cfg.eos_token_ids)
        EXPECT_NE(t, eos);
    }
    // The same prompt again, now in the other engine: the same tokens.
    EXPECT_EQ(run_one(*b, make_request(3, prompt)).tokens, greedy.tokens) << len;
  }
  // Different prompts lead elsewhere.
  EXPECT_NE(run_one(*a, make_request(4, random_prompt(20, 1))).tokens,
            run_one(*a, make_request(5, random_prompt(20, 2))).tokens);
}

TEST(SimBackendTest, BatchedRequestsGiveTheirAloneTokens) {
  const auto cfg = llama8b();
  auto alone = make_sim_engine(cfg);
  auto batched = make_sim_engine(cfg);
  std::map<uint64_t, std::vector<int32_t>> want;
  for (uint64_t id = 1; id <= 8; ++id) {
    auto r = make_request(id, random_prompt(static_cast<int>(10 * id), id), 9);
    want[id] = run_one(*alone, r).tokens;
    ASSERT_FALSE(batched->add_request(r));
  }
  auto got = drain(*batched);
  for (auto& [id, tokens] : want)
    EXPECT_EQ(got[id].tokens, tokens) << id;
  EXPECT_GT(sim_of(*batched).totals().steps, 0u);
  EXPECT_LT(sim_of(*batched).totals().steps, sim_of(*alone).totals().steps)
    << "the batch shares steps";
}

TEST(SimBackendTest, RepeatedPromptHitsThePrefixCacheWithTheSameTokens) {
  auto eng = make_sim_engine(llama8b());
  auto prompt = random_prompt(100, 42);
  auto first = run_one(*eng, make_request(1, prompt));
  const auto after_first = eng->stats();
  auto second = run_one(*eng, make_request(2, prompt));
  EXPECT_EQ(first.cached_prompt_tokens, 0);
  EXPECT_EQ(second.cached_prompt_tokens, 96) << "six full blocks of 16 come from the cache";
  EXPECT_EQ(second.tokens, first.tokens);
  const auto stats = eng->stats();
  EXPECT_EQ(stats.cache.prefix_hit_tokens - after_first.cache.prefix_hit_tokens, 96u);
  EXPECT_EQ(stats.free_blocks, stats.num_blocks) << "every block is free (cached) again";
  // Fewer tokens computed: the modelled second prefill is shorter too.
  EXPECT_EQ(stats.tokens_computed - after_first.tokens_computed,
            static_cast<uint64_t>(100 - 96 + 11));
}

TEST(SimBackendTest, PoolIsTheScaledBlockSizeAndBlocksCarryTheirTokens) {
  const auto cfg = llama8b();
  auto eng = make_sim_engine(cfg, sim_opts(64, 64));
  const auto& sim = sim_of(*eng);
  auto& be = eng->get_backend();
  const size_t bb = be.layout().block_bytes();
  EXPECT_EQ(bb, (size_t{2} << 20) / 64);
  EXPECT_EQ(sim.modelled_block_bytes(), size_t{2} << 20);
  EXPECT_EQ(be.kv_pool_memory().size(), 64 * bb);
  EXPECT_EQ(std::as_const(be).kv_pool_memory().data(), be.kv_pool_memory().data());

  // One prompt of exactly one block, held so its block can be read.
  auto block_of = [&](uint64_t id, std::vector<int32_t> prompt) {
    auto r = make_request(id, std::move(prompt), 1);
    r.keep_kv = true;
    run_one(*eng, r);
    auto exp = eng->export_request_blocks(id);
    EXPECT_TRUE(exp) << error_text(exp.error());
    std::vector<std::byte> out(bb);
    be.read_block(exp->blocks.at(0), out);
    EXPECT_TRUE(eng->release_request(id));
    return out;
  };
  auto a = block_of(1, random_prompt(16, 1));
  auto b = block_of(2, random_prompt(16, 2));
  auto a_again = block_of(3, random_prompt(16, 1));
  EXPECT_NE(a, std::vector<std::byte>(bb)) << "forward writes into the block";
  EXPECT_NE(a, b) << "the bytes follow the tokens";
  EXPECT_EQ(a, a_again);
  // read/write/copy_block move whole blocks.
  be.write_block(10, a);
  be.copy_block(10, 11);
  std::vector<std::byte> copied(bb);
  be.read_block(11, copied);
  EXPECT_EQ(copied, a);
}

TEST(SimBackendTest, KvHandoffBetweenTwoSimEnginesContinuesAsOneEngine) {
  const auto cfg = llama8b();
  auto one = make_sim_engine(cfg);
  auto prefill = make_sim_engine(cfg);
  auto decode = make_sim_engine(cfg);
  EXPECT_EQ(prefill->get_backend().model_fingerprint(), decode->get_backend().model_fingerprint());
  EXPECT_EQ(prefill->hash_seed(), decode->hash_seed());
  for (int len : {5, 16, 40, 97}) {
    const uint64_t id = static_cast<uint64_t>(len);
    auto r = make_request(id, random_prompt(len, id), 10, 0.7f, 99);
    auto want = run_one(*one, r);

    // Zero-copy: prefill's held blocks put into the blocks decode reserved.
    auto head_req = r;
    head_req.params.max_tokens = 1;
    head_req.keep_kv = true;
    auto head = run_one(*prefill, head_req);
    ASSERT_EQ(head.tokens.size(), 1u);
    auto src = prefill->export_request_blocks(id);
    ASSERT_TRUE(src) << error_text(src.error());
    auto plan = decode->reserve_import(r, src->meta);
    ASSERT_TRUE(plan) << error_text(plan.error());
    EXPECT_GT(put_blocks(*prefill, *src, *decode, *plan), 0u);
    ASSERT_FALSE(decode->commit_import(id));
    EXPECT_TRUE(prefill->release_request(id));
    auto tail = drain(*decode)[id];
    std::vector<int32_t> tokens = head.tokens;
    tokens.insert(tokens.end(), tail.tokens.begin(), tail.tokens.end());
    EXPECT_EQ(tokens, want.tokens) << len;
    EXPECT_EQ(tail.finish, finish_reason::length);
  }
  // The copying path (export_request / import_request) too.
  auto r = make_request(500, random_prompt(33, 500), 8);
  auto want = run_one(*one, r);
  auto held = r;
  held.params.max_tokens = 1;
  held.keep_kv = true;
  auto head = run_one(*prefill, held);
  auto exp = prefill->export_request(500);
  ASSERT_TRUE(exp) << error_text(exp.error());
  EXPECT_EQ(exp->data.size(), 3 * prefill->get_backend().layout().block_bytes());
  ASSERT_FALSE(decode->import_request(r, *exp));
  auto tail = drain(*decode)[500];
  head.tokens.insert(head.tokens.end(), tail.tokens.begin(), tail.tokens.end());
  EXPECT_EQ(head.tokens, want.tokens);
}

TEST(SimBackendTest, AHandoffWhoseBytesDoNotArriveGivesOtherTokens) {
  const auto cfg = llama8b();
  auto one = make_sim_engine(cfg);
  auto prefill = make_sim_engine(cfg);
  auto decode = make_sim_engine(cfg);
  auto r = make_request(1, random_prompt(40, 3), 10);
  auto want = run_one(*one, r);
  auto held = r;
  held.params.max_tokens = 1;
  held.keep_kv = true;
  run_one(*prefill, held);
  auto src = prefill->export_request_blocks(1);
  ASSERT_TRUE(src);
  auto plan = decode->reserve_import(r, src->meta);
  ASSERT_TRUE(plan);
  // No put: decode's blocks hold zeros, as after a lost transfer.
  ASSERT_FALSE(decode->commit_import(1));
  auto tail = drain(*decode)[1];
  ASSERT_EQ(tail.tokens.size(), 9u);
  EXPECT_NE(tail.tokens, std::vector<int32_t>(want.tokens.begin() + 1, want.tokens.end()));
}

TEST(SimBackendTest, EmitsOnlyIdsTheServedTokenizerCanDecode) {
  // The llama3-8b config (vocab 128256) served with the nano demo tokenizer
  // (vocab 512): the engine accepts it, and the sim emits only readable,
  // non-special ids below 512.
  auto tok = test::test_tokenizer("nano");
  ASSERT_LT(tok->vocab_size(), 128256);
  model_files files{llama8b(), nullptr, tok};
  backend_options bo;
  bo.choice.kind = backend_kind::sim;
  bo.choice.sim.time_scale = 0;
  bo.choice.sim.payload_scale = 256;
  bo.kv_cache_bytes = size_t{1} << 30; // modelled: 512 blocks of 2 MiB
  auto be = make_backend(files, bo);
  ASSERT_TRUE(be) << error_text(be.error());
  EXPECT_EQ((*be)->num_blocks(), 512);
  EXPECT_EQ((*be)->kv_pool_memory().size(), size_t{1} << 30 >> 8);
  engine::engine eng{std::move(*be), {}, tok};
  auto prompt = tok->encode("Once upon a time", true);
  auto out = run_one(eng, make_request(1, prompt, 40));
  ASSERT_EQ(out.tokens.size(), 40u);
  for (auto t : out.tokens) {
    EXPECT_LT(t, tok->vocab_size());
    EXPECT_FALSE(tok->is_special(t)) << t;
  }
  auto ids = sim_emit_ids(*tok, llama8b());
  EXPECT_GE(ids.size(), 16u);
  for (auto id : ids) {
    auto bytes = tok->token_bytes(id);
    for (char c : bytes)
      EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << id;
  }
}

TEST(SimBackendTest, LogitsRowsEndAfterTheIdsItCanEmit) {
  // Rows of 10 entries instead of 128256: the engine samples within them,
  // and penalties for prompt ids beyond them are no-ops, not overruns.
  auto o = sim_opts();
  o.emit_ids = {5, 6, 7, 8, 9};
  auto eng = make_sim_engine(llama8b(), o);
  EXPECT_EQ(eng->get_backend().logits_vocab(), 10);
  EXPECT_EQ(eng->get_backend().config().vocab_size, 128256) << "prompts may use every id";
  auto r = make_request(1, random_prompt(40, 3), 30, 0.7f);
  r.params.repetition_penalty = 1.3f;
  r.params.frequency_penalty = 0.5f;
  r.params.presence_penalty = 0.2f;
  const auto out = run_one(*eng, r);
  ASSERT_EQ(out.tokens.size(), 30u);
  for (auto t : out.tokens)
    EXPECT_TRUE(t >= 5 && t <= 9) << t;
  EXPECT_EQ(run_one(*make_sim_engine(llama8b(), o), r).tokens, out.tokens) << "deterministic";
}

TEST(SimBackendTest, ForwardSleepsForTheScaledModelledTime) {
  std::vector<std::chrono::steady_clock::time_point> deadlines;
  auto o = sim_opts();
  o.settings.time_scale = 0.5;
  o.sleep_until = [&](std::chrono::steady_clock::time_point t) { deadlines.push_back(t); };
  auto eng = make_sim_engine(llama8b(), o);
  ASSERT_FALSE(eng->add_request(make_request(1, random_prompt(300, 1), 1)));
  const auto before = std::chrono::steady_clock::now();
  (void)eng->step();
  const auto after = std::chrono::steady_clock::now();
  ASSERT_EQ(deadlines.size(), 1u);
  const auto& sim = sim_of(*eng);
  const auto scaled = std::chrono::duration<double>(sim.last_step().seconds * 0.5);
  EXPECT_GT(sim.last_step().seconds, 0.0);
  EXPECT_GE(deadlines[0] - before, scaled - std::chrono::microseconds{1});
  EXPECT_LE(deadlines[0] - after, scaled + std::chrono::microseconds{1});
  EXPECT_EQ(sim.totals().steps, 1u);
  EXPECT_EQ(sim.totals().tokens, 300u);
  EXPECT_DOUBLE_EQ(sim.totals().modelled_s, sim.last_step().seconds);
  // time_scale 0: no waiting at all.
  deadlines.clear();
  auto fast = sim_opts();
  fast.sleep_until = o.sleep_until;
  auto eng0 = make_sim_engine(llama8b(), fast);
  run_one(*eng0, make_request(1, random_prompt(30, 1), 3));
  EXPECT_TRUE(deadlines.empty());
}

TEST(SimBackendTest, BlocksLoadedFromATierCostTheirRealBytesOverTheHostLink) {
  // A request leaves 3 cached blocks; a second engine takes them through
  // extend_cached_prefix (write_block), as from a kv store.
  const auto r = make_request(1, random_prompt(53, 9), 4);
  auto a = make_sim_engine(llama8b());
  const auto want = run_one(*a, r);
  const auto hashes = a->block_hashes(r.prompt);
  ASSERT_EQ(hashes.size(), 3u);
  auto b = make_sim_engine(llama8b());
  ASSERT_EQ(b->extend_cached_prefix(hashes, [&](size_t i, std::span<std::byte> out) {
    return a->read_cached_block(hashes[i], out);
  }), 3u);
  const auto& sim = sim_of(*b);
  EXPECT_EQ(sim.totals().loaded_blocks, 3u);
  // The loads are paid by the next step: its time is the roofline's plus
  // 3 real blocks (16 tokens x 128 KiB each for llama3-8b in bf16) over
  // 0.8 of the H100's 64 GB/s.
  ASSERT_FALSE(b->add_request(r));
  (void)b->step();
  const double load = 3.0 * 16 * 131072 / (64e9 * 0.8);
  EXPECT_DOUBLE_EQ(sim.last_step().load_s, load);
  EXPECT_DOUBLE_EQ(sim.last_step().seconds,
                   std::max(sim.last_step().memory_s, sim.last_step().compute_s) + load);
  EXPECT_DOUBLE_EQ(sim.totals().load_s, load);
  (void)drain(*b);
  EXPECT_DOUBLE_EQ(sim.totals().load_s, load) << "paid once";
  EXPECT_EQ(sim_of(*a).totals().load_s, 0.0) << "computing blocks loads nothing";
  EXPECT_EQ(run_one(*make_sim_engine(llama8b()), make_request(2, r.prompt, 4)).tokens, want.tokens);
}

TEST(SimBackendTest, ItPricesALoadAsWriteBlockChargesItScaledLikeItsSteps) {
  auto o = sim_opts();
  o.settings.time_scale = 0.1;
  o.sleep_until = [](std::chrono::steady_clock::time_point) {};
  auto eng = make_sim_engine(llama8b(), o);
  const auto& be = eng->get_backend();
  const auto bb = be.layout().block_bytes();
  const auto load = be.load_wall_seconds(3 * bb);
  ASSERT_TRUE(load);
  // 3 real blocks (16 tokens x 128 KiB) over 0.8 of 64 GB/s, x time_scale.
  EXPECT_DOUBLE_EQ(*load, 3.0 * 16 * 131072 / (64e9 * 0.8) * 0.1);
  const auto compute = be.prefill_wall_seconds(48, 0);
  ASSERT_TRUE(compute);
  EXPECT_LT(*load, *compute) << "an H100 loads 48 tokens of llama3-8b KV faster than it computes them";
  // Without a clock (time_scale 0) there is no wall time to price.
  EXPECT_FALSE(make_sim_engine(llama8b())->get_backend().load_wall_seconds(bb));
}

TEST(SimBackendTest, EosProbabilityEndsRequestsEarlyAndDeterministically) {
  auto o = sim_opts();
  o.settings.eos_probability = 0.2;
  auto a = make_sim_engine(llama8b(), o);
  auto b = make_sim_engine(llama8b(), o);
  int stopped = 0;
  for (uint64_t id = 1; id <= 10; ++id) {
    auto r = make_request(id, random_prompt(20, id), 50);
    auto x = run_one(*a, r);
    auto y = run_one(*b, r);
    EXPECT_EQ(x.tokens, y.tokens);
    stopped += x.finish == finish_reason::stop ? 1 : 0;
    r.params.ignore_eos = true;
    r.id += 100;
    EXPECT_EQ(run_one(*a, r).tokens.size(), 50u) << "ignore_eos runs to max_tokens";
  }
  EXPECT_GE(stopped, 8) << "P(no EOS in 50 steps) = 0.8^50";
}

TEST(SimBackendTest, FingerprintFollowsTheConfigAndThePayloadScale) {
  const auto cfg = llama8b();
  auto a = sim::make_sim_backend(cfg, sim_opts());
  auto b = sim::make_sim_backend(cfg, sim_opts(100));
  auto c = sim::make_sim_backend(cfg, sim_opts(512, 64));
  auto other = sim::make_sim_backend(*model_shape("llama3-70b"), sim_opts());
  ASSERT_TRUE(a && b && c && other);
  EXPECT_EQ((*a)->model_fingerprint(), (*b)->model_fingerprint());
  EXPECT_NE((*a)->model_fingerprint(), (*c)->model_fingerprint());
  EXPECT_NE((*a)->model_fingerprint(), (*other)->model_fingerprint());
  EXPECT_NE((*a)->description().find("sim h100"), std::string::npos) << (*a)->description();
}

TEST(SimBackendTest, BadSettingsAreErrorsNamingThem) {
  const auto cfg = llama8b();
  auto with = [&](auto change) {
    auto o = sim_opts();
    change(o);
    auto be = sim::make_sim_backend(cfg, o);
    EXPECT_FALSE(be);
    return be ? std::string{} : error_text(be.error());
  };
  EXPECT_NE(with([](auto& o) { o.settings.gpu = "b200"; }).find("unknown sim GPU 'b200'"),
            std::string::npos);
  EXPECT_NE(with([](auto& o) { o.settings.payload_scale = 3; }).find("payload_scale 3"),
            std::string::npos);
  EXPECT_NE(with([](auto& o) { o.settings.time_scale = -1; }).find("time_scale"),
            std::string::npos);
  EXPECT_NE(with([](auto& o) { o.settings.memory_efficiency = 1.5; }).find("memory_efficiency"),
            std::string::npos);
  EXPECT_NE(with([](auto& o) { o.emit_ids = {128256}; }).find("emit id 128256"),
            std::string::npos);
  // The KV capacity derived from the GPU: 8B fits an H100, 70B needs four.
  auto derived = sim_opts(0);
  auto fits = sim::make_sim_backend(cfg, derived);
  ASSERT_TRUE(fits) << error_text(fits.error());
  const double kv_gb = static_cast<double>((*fits)->num_blocks()) * (2 << 20) / 1e9;
  // 8.03e9 parameters less the 0.53e9 of the (only gathered) embedding, bf16.
  EXPECT_NEAR(kv_gb, 80 * 0.9 - 15.01, 0.05);
  auto too_big = sim::make_sim_backend(*model_shape("llama3-70b"), derived);
  ASSERT_FALSE(too_big);
  EXPECT_NE(error_text(too_big.error()).find("do not fit"), std::string::npos);
  derived.settings.tensor_parallel = 4;
  EXPECT_TRUE(sim::make_sim_backend(*model_shape("llama3-70b"), derived));
  // The cpu backend needs weights.
  model_files no_weights{cfg, nullptr, nullptr};
  auto cpu = make_backend(no_weights, {});
  ASSERT_FALSE(cpu);
  EXPECT_NE(error_text(cpu.error()).find("weights"), std::string::npos);
}

} // namespace
