// Invariants that hold for any weights, checked token for token (and
// logprob for logprob: the kernels are batch-invariant, so these are exact).
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;

using result = test::run_result;
using test::collect;
using test::drain;
using test::make_request;
using test::random_prompt;
using test::run_all;
using test::run_one;

test::test_engine_options opts_with(int32_t blocks = 256, int32_t budget = 512,
                                    int32_t chunk = 0) {
  test::test_engine_options o;
  o.backend.num_blocks = blocks;
  o.engine.scheduling.max_batched_tokens = budget;
  o.engine.scheduling.max_prefill_chunk = chunk;
  return o;
}

TEST(EngineInvariantsTest, ChunkedPrefillEqualsOneShot) {
  auto r = make_request(1, random_prompt(45, 1));
  auto whole = run_one(*test::make_test_engine("nano", opts_with()), r);
  for (int chunk : {1, 7, 16}) {
    auto chunked = run_one(*test::make_test_engine("nano", opts_with(256, 512, chunk)), r);
    EXPECT_EQ(chunked, whole) << "chunk " << chunk;
  }
}

TEST(EngineInvariantsTest, ABatchOfNEqualsTheNSequencesAlone) {
  std::vector<request> reqs;
  for (uint64_t i = 0; i < 6; ++i)
    reqs.push_back(make_request(i, random_prompt(5 + 9 * static_cast<int>(i), 10 + i), 10,
                                i % 2 ? 0.8f : 0.0f));
  auto eng = test::make_test_engine("nano", opts_with(256, 64));
  auto batched = run_all(*eng, reqs);
  for (const auto& r : reqs) {
    auto alone = run_one(*test::make_test_engine("nano", opts_with()), r);
    EXPECT_EQ(batched[r.id], alone) << "request " << r.id;
  }
}

TEST(EngineInvariantsTest, PrefixCachedGenerationEqualsUncached) {
  auto prompt = random_prompt(70, 3);
  auto uncached_opts = opts_with();
  uncached_opts.engine.enable_prefix_caching = false;
  auto reference = run_one(*test::make_test_engine("nano", uncached_opts), make_request(2, prompt));

  auto eng = test::make_test_engine("nano", opts_with());
  auto first = run_one(*eng, make_request(1, prompt));
  EXPECT_EQ(first.cached_prompt_tokens, 0);
  auto second = run_one(*eng, make_request(2, prompt));
  EXPECT_EQ(second, reference);
  EXPECT_EQ(first, reference);
  // 70 tokens: the 4 full blocks before the last token are reused.
  EXPECT_EQ(second.cached_prompt_tokens, 64);
  const auto st = eng->stats().cache;
  EXPECT_EQ(st.prefix_hit_tokens, 64u);
  EXPECT_EQ(st.prefix_query_tokens, 140u);

  // A shared prefix with a different tail reuses only the common blocks.
  auto other = prompt;
  other[40] += 1;
  auto third = run_one(*eng, make_request(3, other));
  EXPECT_EQ(third.cached_prompt_tokens, 32);
  auto third_ref = run_one(*test::make_test_engine("nano", uncached_opts), make_request(3, other));
  EXPECT_EQ(third, third_ref);
}

TEST(EngineInvariantsTest, CacheSaltKeepsTenantsApart) {
  auto prompt = random_prompt(40, 4);
  auto eng = test::make_test_engine("nano", opts_with());
  auto a = make_request(1, prompt);
  a.cache_salt = "tenant-a";
  run_one(*eng, a);
  auto b = make_request(2, prompt);
  b.cache_salt = "tenant-b";
  EXPECT_EQ(run_one(*eng, b).cached_prompt_tokens, 0);
  auto a2 = make_request(3, prompt);
  a2.cache_salt = "tenant-a";
  EXPECT_EQ(run_one(*eng, a2).cached_prompt_tokens, 32);
}

TEST(EngineInvariantsTest, PreemptedAndResumedEqualsUninterrupted) {
  std::vector<request> reqs;
  for (uint64_t i = 0; i < 4; ++i)
    reqs.push_back(make_request(i, random_prompt(30, 20 + i), 40, i % 2 ? 0.9f : 0.0f));
  auto roomy = run_all(*test::make_test_engine("nano", opts_with(256)), reqs);
  // 4 sequences of up to 70 tokens need 20 blocks; 12 forces preemption.
  auto eng = test::make_test_engine("nano", opts_with(12));
  auto tight = run_all(*eng, reqs);
  EXPECT_GT(eng->stats().preemptions, 0u);
  for (const auto& r : reqs)
    EXPECT_EQ(tight[r.id], roomy[r.id]) << "request " << r.id;
}

TEST(EngineInvariantsTest, PagedBlocksInAnyOrderGiveTheSameResult) {
  auto r = make_request(9, random_prompt(50, 5), 20);
  auto fresh = run_one(*test::make_test_engine("nano", opts_with()), r);
  // Churn the pool so the request gets scattered, non-contiguous blocks.
  auto eng = test::make_test_engine("nano", opts_with(64));
  std::vector<request> churn;
  for (uint64_t i = 0; i < 5; ++i)
    churn.push_back(make_request(100 + i, random_prompt(7 + 13 * static_cast<int>(i), 50 + i), 3));
  run_all(*eng, churn);
  EXPECT_EQ(run_one(*eng, r), fresh);
}

TEST(EngineInvariantsTest, ExportThenImportContinuesIdentically) {
  for (float temperature : {0.0f, 0.7f}) {
    auto r = make_request(5, random_prompt(37, 6), 16, temperature);
    r.params.seed.reset(); // the engine's own seed must travel with the export
    auto a = test::make_test_engine("nano", opts_with());
    auto whole = run_one(*a, r);

    auto b = test::make_test_engine("nano", opts_with());
    ASSERT_FALSE(b->add_request(r));
    std::map<uint64_t, result> partial;
    for (int i = 0; i < 4; ++i) // prefill + 3 decode steps
      collect(partial, b->step());
    auto kv = b->export_request(r.id);
    ASSERT_TRUE(kv) << error_text(kv.error());
    EXPECT_EQ(partial[r.id].tokens.size(), 4u);

    // The importer runs with a different engine seed and a churned pool.
    auto c_opts = opts_with(128);
    c_opts.engine.seed = 77;
    auto c = test::make_test_engine("nano", c_opts);
    run_one(*c, make_request(50, random_prompt(20, 60), 2));
    ASSERT_FALSE(c->import_request(r, *kv));
    auto rest = drain(*c)[r.id];
    auto joined = partial[r.id];
    joined.tokens.insert(joined.tokens.end(), rest.tokens.begin(), rest.tokens.end());
    joined.logprobs.insert(joined.logprobs.end(), rest.logprobs.begin(), rest.logprobs.end());
    joined.finish = rest.finish;
    EXPECT_EQ(joined, whole) << "temperature " << temperature;
  }
}

// The disaggregated hand-off: a prefill engine computes the prompt and the
// first token, holds the KV for export, and a decode engine continues.
TEST(EngineInvariantsTest, PrefillOnOneEngineDecodeOnAnotherEqualsOneEngine) {
  auto r = make_request(7, random_prompt(53, 15), 20, 0.8f);
  auto whole = run_one(*test::make_test_engine("nano", opts_with()), r);

  auto prefill = test::make_test_engine("nano", opts_with(64));
  auto first = r;
  first.params.max_tokens = 1;
  first.keep_kv = true;
  auto head = run_one(*prefill, first);
  ASSERT_EQ(head.tokens.size(), 1u);
  EXPECT_EQ(head.finish, finish_reason::length);
  EXPECT_FALSE(prefill->has_unfinished()) << "a held request is finished";
  auto kv = prefill->export_request(r.id);
  ASSERT_TRUE(kv) << error_text(kv.error());
  EXPECT_EQ(kv->num_computed, 53);
  EXPECT_TRUE(prefill->release_request(r.id));
  EXPECT_FALSE(prefill->release_request(r.id));
  EXPECT_FALSE(prefill->export_request(r.id)) << "released: nothing left to export";

  auto decode = test::make_test_engine("nano", opts_with());
  ASSERT_FALSE(decode->import_request(r, *kv));
  auto tail = drain(*decode)[r.id];
  head.tokens.insert(head.tokens.end(), tail.tokens.begin(), tail.tokens.end());
  head.logprobs.insert(head.logprobs.end(), tail.logprobs.begin(), tail.logprobs.end());
  head.finish = tail.finish;
  EXPECT_EQ(head, whole);
  // The held blocks went back to the pool: two requests needing 32 blocks
  // each run side by side without preemption.
  auto both = run_all(*prefill, {make_request(8, random_prompt(500, 16), 12),
                                 make_request(9, random_prompt(500, 17), 12)});
  EXPECT_EQ(both[8].tokens.size(), 12u);
  EXPECT_EQ(both[9].tokens.size(), 12u);
  EXPECT_EQ(prefill->stats().preemptions, 0u);
}

TEST(EngineInvariantsTest, ImportRejectsAMismatchedOrCorruptExport) {
  auto r = make_request(5, random_prompt(37, 6), 16);
  auto a = test::make_test_engine("nano", opts_with());
  ASSERT_FALSE(a->add_request(r));
  a->step();
  auto kv = a->export_request(r.id);
  ASSERT_TRUE(kv);
  auto b = test::make_test_engine("nano", opts_with());
  auto bad_tokens = *kv;
  bad_tokens.tokens[3] ^= 1;
  auto err = b->import_request(r, bad_tokens);
  EXPECT_TRUE(err == engine_errc::kv_mismatch);
  EXPECT_NE(error_text(err).find("hashes"), std::string::npos) << error_text(err);
  auto short_data = *kv;
  short_data.data.resize(short_data.data.size() - 1);
  err = b->import_request(r, short_data);
  EXPECT_NE(error_text(err).find("bytes"), std::string::npos) << error_text(err);
  auto other = test::make_test_engine("nano-tied", opts_with());
  err = other->import_request(r, *kv);
  EXPECT_NE(error_text(err).find("different model"), std::string::npos) << error_text(err);
  EXPECT_FALSE(b->import_request(r, *kv)) << "the intact export still imports";
}

TEST(EngineInvariantsTest, ForkedRequestSharesBlocksAndCopiesOnWrite) {
  auto r = make_request(1, random_prompt(21, 8), 10);
  auto eng = test::make_test_engine("nano", opts_with());
  auto alone = run_one(*test::make_test_engine("nano", opts_with()), r);
  ASSERT_FALSE(eng->add_request(r));
  std::map<uint64_t, result> out;
  collect(out, eng->step()); // prefill: first token
  sampling_params p = r.params;
  ASSERT_FALSE(eng->fork_request(1, 2, p));
  while (eng->has_unfinished())
    collect(out, eng->step());
  EXPECT_EQ(out[1], alone);
  // The child continues from the parent's first token, identically.
  std::vector<int32_t> tail(alone.tokens.begin() + 1, alone.tokens.end());
  ASSERT_GE(out[2].tokens.size(), tail.size());
  out[2].tokens.resize(tail.size());
  EXPECT_EQ(out[2].tokens, tail);
  EXPECT_GT(eng->stats().cache.cow_copies, 0u);
}

TEST(EngineInvariantsTest, SameSeedSameOutputDifferentSeedDifferentOutput) {
  auto r = make_request(1, random_prompt(10, 9), 24, 1.0f);
  auto a = run_one(*test::make_test_engine("nano", opts_with()), r);
  auto b = run_one(*test::make_test_engine("nano", opts_with()), r);
  EXPECT_EQ(a, b);
  r.params.seed = 4242;
  auto c = run_one(*test::make_test_engine("nano", opts_with()), r);
  EXPECT_NE(a.tokens, c.tokens);
}

TEST(EngineInvariantsTest, StopsAtMaxTokensEosAndStopTokens) {
  auto eng = test::make_test_engine("nano", opts_with());
  auto r = make_request(1, random_prompt(10, 11), 5);
  auto res = run_one(*eng, r);
  EXPECT_EQ(res.tokens.size(), 5u);
  EXPECT_EQ(res.finish, finish_reason::length);
  EXPECT_EQ(res.stop_token, -1);
  // Make the 3rd greedy token a stop token.
  auto stop = make_request(2, r.prompt, 5);
  stop.params.stop_token_ids = {res.tokens[2]};
  auto s = run_one(*eng, stop);
  EXPECT_EQ(s.finish, finish_reason::stop);
  ASSERT_LE(s.tokens.size(), 3u);
  EXPECT_EQ(s.tokens.back(), res.tokens[2]);
  // The stop token is reported as a token id, not as a stop string.
  EXPECT_EQ(s.stop_token, res.tokens[2]);
  EXPECT_EQ(s.stop_reason, "");
  // min_tokens keeps it from being sampled until then.
  stop.id = 3;
  stop.params.min_tokens = 5;
  auto deferred = run_one(*eng, stop);
  EXPECT_EQ(deferred.tokens.size(), 5u);
  for (size_t i = 0; i < deferred.tokens.size(); ++i)
    EXPECT_NE(deferred.tokens[i], res.tokens[2]) << "position " << i;
}

TEST(EngineInvariantsTest, StopStringCutsTheTextAndNeverEmitsItsStart) {
  auto o = opts_with();
  o.with_tokenizer = true;
  auto eng = test::make_test_engine("nano", o);
  auto r = make_request(1, random_prompt(10, 12), 24);
  auto full = run_one(*eng, r);
  ASSERT_GE(full.text.size(), 6u) << "the random model produced too little text";
  // Stop at a substring in the middle of the text.
  const std::string needle = full.text.substr(full.text.size() / 2, 2);
  const auto cut = full.text.find(needle);
  auto s = r;
  s.id = 2;
  s.params.stop = {needle};
  auto stopped = run_one(*eng, s);
  EXPECT_EQ(stopped.finish, finish_reason::stop);
  EXPECT_EQ(stopped.text, full.text.substr(0, cut));
}

TEST(EngineInvariantsTest, RejectsBadRequestsWithClearErrors) {
  auto eng = test::make_test_engine("nano", opts_with());
  auto empty = make_request(1, {});
  EXPECT_NE(error_text(eng->add_request(empty)).find("prompt is empty"), std::string::npos);
  auto oov = make_request(2, {1, 2, 100000});
  EXPECT_NE(error_text(eng->add_request(oov)).find("outside the vocabulary"), std::string::npos);
  auto too_long = make_request(3, random_prompt(10, 1), 100000);
  EXPECT_NE(error_text(eng->add_request(too_long)).find("maximum context length"), std::string::npos);
  auto ok = make_request(4, random_prompt(10, 1));
  ASSERT_FALSE(eng->add_request(ok));
  EXPECT_NE(error_text(eng->add_request(ok)).find("already in use"), std::string::npos);
  auto bad_p = make_request(5, random_prompt(10, 1));
  bad_p.params.top_p = 2;
  EXPECT_NE(error_text(eng->add_request(bad_p)).find("top_p"), std::string::npos);
  EXPECT_EQ(eng->num_unfinished(), 1u) << "rejected requests leave nothing behind";
}

TEST(EngineInvariantsTest, AbortFreesTheRequestAndItsBlocks) {
  auto eng = test::make_test_engine("nano", opts_with(32));
  ASSERT_FALSE(eng->add_request(make_request(1, random_prompt(100, 13), 50)));
  eng->step();
  auto out = eng->abort(1);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->finish, finish_reason::abort);
  EXPECT_FALSE(eng->has_unfinished());
  EXPECT_FALSE(eng->abort(1).has_value());
  // All 32 blocks are usable again: a request needing 30 of them runs.
  auto res = run_one(*eng, make_request(2, random_prompt(470, 14), 10));
  EXPECT_EQ(res.tokens.size(), 10u);
}

} // namespace
