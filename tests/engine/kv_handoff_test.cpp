// The zero-copy KV hand-off (kv_export.hpp): an exporter's blocks are
// copied pool to pool, as one-sided RMA would, into blocks the importer
// reserved; the importer then continues token for token (and logprob for
// logprob) as one engine would have.
#include <cstring>
#include <map>
#include <utility>

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
using test::put_blocks;
using test::random_prompt;
using test::run_one;

test::test_engine_options opts_with(int32_t blocks = 256, uint64_t engine_seed = 0) {
  test::test_engine_options o;
  o.backend.num_blocks = blocks;
  o.engine.seed = engine_seed;
  return o;
}

// The prefill half of a disaggregated request: prompt and first token,
// KV held for export.
result prefill_held(engine::engine& eng, const request& r) {
  auto first = r;
  first.params.max_tokens = 1;
  first.keep_kv = true;
  auto head = run_one(eng, first);
  EXPECT_EQ(head.tokens.size(), 1u);
  return head;
}

result joined(result head, const result& tail) {
  head.tokens.insert(head.tokens.end(), tail.tokens.begin(), tail.tokens.end());
  head.logprobs.insert(head.logprobs.end(), tail.logprobs.begin(), tail.logprobs.end());
  head.finish = tail.finish;
  return head;
}

TEST(KvHandoffTest, CpuPoolMemoryAddressesBlockIdTimesBlockBytes) {
  auto eng = test::make_test_engine("nano", opts_with(8));
  auto& be = eng->get_backend();
  const size_t bb = be.layout().block_bytes();
  auto pool = be.kv_pool_memory();
  ASSERT_EQ(pool.size(), 8 * bb);
  EXPECT_EQ(std::as_const(be).kv_pool_memory().data(), pool.data());
  std::vector<std::byte> in(bb);
  for (size_t i = 0; i < bb; ++i)
    in[i] = static_cast<std::byte>(i * 7 + 1);
  be.write_block(5, in);
  EXPECT_EQ(std::memcmp(pool.data() + 5 * bb, in.data(), bb), 0);
  std::memset(pool.data() + 3 * bb, 0x5a, bb);
  std::vector<std::byte> out(bb);
  be.read_block(3, out);
  EXPECT_EQ(out, std::vector<std::byte>(bb, std::byte{0x5a}));
}

TEST(KvHandoffTest, ZeroCopyHandoffEqualsOneEngine) {
  for (float temperature : {0.0f, 0.8f}) {
    auto r = make_request(7, random_prompt(53, 15), 20, temperature);
    auto whole = run_one(*test::make_test_engine("nano", opts_with()), r);

    auto prefill = test::make_test_engine("nano", opts_with(64));
    auto head = prefill_held(*prefill, r);
    auto src = prefill->export_request_blocks(r.id);
    ASSERT_TRUE(src) << error_text(src.error());
    EXPECT_TRUE(src->meta.data.empty());
    EXPECT_EQ(src->meta.num_computed, 53);
    ASSERT_EQ(src->blocks.size(), 4u) << "53 tokens in blocks of 16";
    EXPECT_EQ(src->meta.block_hashes.size(), 3u) << "full blocks only";

    // The importer has another engine seed and a churned pool, so its
    // blocks are not the exporter's ids.
    auto decode = test::make_test_engine("nano", opts_with(128, 77));
    run_one(*decode, make_request(50, random_prompt(40, 60), 2));
    auto plan = decode->reserve_import(r, src->meta);
    ASSERT_TRUE(plan) << error_text(plan.error());
    EXPECT_EQ(plan->request_id, r.id);
    EXPECT_EQ(plan->needs_data, (std::vector<uint8_t>{1, 1, 1, 1})) << "nothing cached here";
    EXPECT_NE(plan->blocks, src->blocks);
    EXPECT_FALSE(decode->has_unfinished()) << "a reserved import waits for data, not steps";
    EXPECT_EQ(decode->num_reserved_imports(), 1u);
    EXPECT_TRUE(decode->step().empty());

    EXPECT_EQ(put_blocks(*prefill, *src, *decode, *plan), 4u);
    EXPECT_TRUE(prefill->release_request(r.id)) << "the exporter lets go once the puts are done";
    ASSERT_FALSE(decode->commit_import(r.id));
    EXPECT_EQ(decode->num_reserved_imports(), 0u);
    EXPECT_TRUE(decode->has_unfinished());
    auto tail = drain(*decode)[r.id];
    EXPECT_EQ(joined(head, tail), whole) << "temperature " << temperature;
    EXPECT_EQ(tail.cached_prompt_tokens, 53) << "the imported prompt counts as cached";
  }
}

TEST(KvHandoffTest, ImporterHoldingThePrefixSkipsThoseBlocks) {
  // 53 tokens: three full blocks and a partial one; 48: three full blocks,
  // all of them cached, so nothing moves at all.
  for (int prompt_len : {53, 48}) {
    auto r = make_request(7, random_prompt(prompt_len, 15), 20, 0.8f);
    auto whole = run_one(*test::make_test_engine("nano", opts_with()), r);
    auto prefill = test::make_test_engine("nano", opts_with(64));
    auto head = prefill_held(*prefill, r);
    auto src = prefill->export_request_blocks(r.id);
    ASSERT_TRUE(src) << error_text(src.error());

    auto decode = test::make_test_engine("nano", opts_with(128));
    run_one(*decode, make_request(60, r.prompt, 3)); // the same prompt, another request
    const auto hits_before = decode->stats().cache.prefix_hit_tokens;
    auto plan = decode->reserve_import(r, src->meta);
    ASSERT_TRUE(plan) << error_text(plan.error());
    std::vector<uint8_t> expect(3, 0);
    if (prompt_len % 16 != 0)
      expect.push_back(1); // the partial block never comes from the cache
    EXPECT_EQ(plan->needs_data, expect) << prompt_len << " tokens";
    EXPECT_EQ(decode->stats().cache.prefix_hit_tokens - hits_before, 48u);
    // The shared blocks hold exactly what the exporter would have sent.
    const size_t bb = src->meta.layout.block_bytes();
    auto from_pool = prefill->get_backend().kv_pool_memory();
    auto to_pool = decode->get_backend().kv_pool_memory();
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(std::memcmp(to_pool.data() + static_cast<size_t>(plan->blocks[i]) * bb,
                            from_pool.data() + static_cast<size_t>(src->blocks[i]) * bb, bb),
                0)
        << "block " << i;

    EXPECT_EQ(put_blocks(*prefill, *src, *decode, *plan), expect.size() - 3);
    ASSERT_FALSE(decode->commit_import(r.id));
    EXPECT_EQ(joined(head, drain(*decode)[r.id]), whole) << prompt_len << " tokens";

    // The copying import takes the same path: with the prefix cached it
    // writes only the partial block, and still continues identically.
    auto kv = prefill->export_request(r.id);
    ASSERT_TRUE(kv) << error_text(kv.error());
    auto copy_decode = test::make_test_engine("nano", opts_with(128));
    run_one(*copy_decode, make_request(60, r.prompt, 3));
    const auto copy_hits_before = copy_decode->stats().cache.prefix_hit_tokens;
    ASSERT_FALSE(copy_decode->import_request(r, *kv));
    EXPECT_EQ(copy_decode->stats().cache.prefix_hit_tokens - copy_hits_before, 48u);
    EXPECT_EQ(joined(head, drain(*copy_decode)[r.id]), whole) << prompt_len << " tokens, copied";
  }
}

TEST(KvHandoffTest, OnlyACommittedImportFeedsThePrefixCache) {
  auto r = make_request(7, random_prompt(53, 15), 20);
  auto prefill = test::make_test_engine("nano", opts_with(64));
  prefill_held(*prefill, r);
  auto src = prefill->export_request_blocks(r.id);
  ASSERT_TRUE(src);

  // Reserved and written, not committed: the blocks are nobody's prefix.
  auto early_engine = test::make_test_engine("nano", opts_with(128));
  auto plan = early_engine->reserve_import(r, src->meta);
  ASSERT_TRUE(plan);
  put_blocks(*prefill, *src, *early_engine, *plan);
  ASSERT_FALSE(early_engine->add_request(make_request(8, r.prompt, 2)));
  std::map<uint64_t, result> early;
  collect(early, early_engine->step());
  EXPECT_EQ(early[8].cached_prompt_tokens, 0);

  // Committed: a later request with the same prompt reuses its full blocks.
  auto decode = test::make_test_engine("nano", opts_with(128));
  plan = decode->reserve_import(r, src->meta);
  ASSERT_TRUE(plan);
  put_blocks(*prefill, *src, *decode, *plan);
  ASSERT_FALSE(decode->commit_import(r.id));
  drain(*decode);
  auto later = run_one(*decode, make_request(9, r.prompt, 2));
  EXPECT_EQ(later.cached_prompt_tokens, 48) << "the imported full blocks are cached";
  auto reference = run_one(*test::make_test_engine("nano", opts_with()), make_request(9, r.prompt, 2));
  EXPECT_EQ(later, reference) << "and hold the right KV";
}

TEST(KvHandoffTest, ReservedImportIsNeverScheduledPreemptedOrEvicted) {
  auto r = make_request(7, random_prompt(53, 15), 20);
  auto whole = run_one(*test::make_test_engine("nano", opts_with()), r);
  auto prefill = test::make_test_engine("nano", opts_with(64));
  auto head = prefill_held(*prefill, r);
  auto src = prefill->export_request_blocks(r.id);
  ASSERT_TRUE(src);

  // 16 blocks: the reservation takes 4, and two requests growing to 8
  // blocks each run meanwhile; they preempt each other, never the
  // reservation.
  auto decode = test::make_test_engine("nano", opts_with(16));
  auto plan = decode->reserve_import(r, src->meta);
  ASSERT_TRUE(plan);
  EXPECT_EQ(decode->stats().free_blocks, 12) << "reserved blocks count as used";
  put_blocks(*prefill, *src, *decode, *plan);
  ASSERT_FALSE(decode->add_request(make_request(8, random_prompt(60, 3), 60)));
  ASSERT_FALSE(decode->add_request(make_request(9, random_prompt(60, 4), 60)));
  auto others = drain(*decode);
  EXPECT_EQ(others[8].tokens.size(), 60u);
  EXPECT_EQ(others[9].tokens.size(), 60u);
  EXPECT_EQ(others.count(r.id), 0u) << "the reserved import produced nothing";
  EXPECT_GT(decode->stats().preemptions, 0u);
  EXPECT_EQ(decode->num_reserved_imports(), 1u);
  EXPECT_EQ(decode->stats().free_blocks, 12);

  EXPECT_FALSE(decode->export_request(r.id)) << "its KV is not committed";
  EXPECT_TRUE(decode->fork_request(r.id, 10, r.params) == engine_errc::unknown_request);
  EXPECT_FALSE(decode->release_request(r.id));
  EXPECT_TRUE(decode->add_request(make_request(r.id, r.prompt)) == engine_errc::bad_request)
    << "the id is in use";
  ASSERT_FALSE(decode->commit_import(r.id));
  EXPECT_EQ(joined(head, drain(*decode)[r.id]), whole);
}

TEST(KvHandoffTest, CancelImportFreesTheReservedBlocks) {
  auto r = make_request(7, random_prompt(53, 15), 20);
  auto prefill = test::make_test_engine("nano", opts_with(64));
  prefill_held(*prefill, r);
  auto src = prefill->export_request_blocks(r.id);
  ASSERT_TRUE(src);

  auto decode = test::make_test_engine("nano", opts_with(32));
  const int32_t free_before = decode->stats().free_blocks;
  EXPECT_EQ(free_before, 32);
  auto plan = decode->reserve_import(r, src->meta);
  ASSERT_TRUE(plan);
  EXPECT_EQ(decode->stats().free_blocks, free_before - 4);
  put_blocks(*prefill, *src, *decode, *plan); // half-done transfers leave garbage; no matter
  EXPECT_TRUE(decode->cancel_import(r.id));
  EXPECT_EQ(decode->stats().free_blocks, free_before);
  EXPECT_EQ(decode->num_reserved_imports(), 0u);
  EXPECT_FALSE(decode->cancel_import(r.id)) << "already cancelled";
  EXPECT_TRUE(decode->commit_import(r.id) == engine_errc::unknown_request);
  EXPECT_FALSE(decode->has_unfinished());
  // A cancelled import left nothing in the prefix cache.
  auto fresh = run_one(*decode, make_request(8, r.prompt, 2));
  EXPECT_EQ(fresh.cached_prompt_tokens, 0);

  // abort() drops a reserved import too; the id can be reserved again.
  auto again = decode->reserve_import(r, src->meta);
  ASSERT_TRUE(again) << error_text(again.error());
  auto out = decode->abort(r.id);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->finish, finish_reason::abort);
  EXPECT_EQ(decode->num_reserved_imports(), 0u);
  EXPECT_EQ(decode->stats().free_blocks, free_before);
}

TEST(KvHandoffTest, CommitFailsForAnIdThatIsNotAReservedImport) {
  auto eng = test::make_test_engine("nano", opts_with(32));
  auto err = eng->commit_import(999);
  EXPECT_TRUE(err == engine_errc::unknown_request);
  EXPECT_NE(error_text(err).find("no reserved import 999"), std::string::npos) << error_text(err);
  ASSERT_FALSE(eng->add_request(make_request(1, random_prompt(20, 1))));
  EXPECT_TRUE(eng->commit_import(1) == engine_errc::unknown_request) << "a running request";
  EXPECT_FALSE(eng->cancel_import(1)) << "cancel_import does not abort running requests";
  EXPECT_TRUE(eng->has_unfinished());
}

TEST(KvHandoffTest, ReserveRejectsABadExportAndAllocatesNothing) {
  auto r = make_request(7, random_prompt(53, 15), 20);
  auto prefill = test::make_test_engine("nano", opts_with(64));
  prefill_held(*prefill, r);
  auto src = prefill->export_request_blocks(r.id);
  ASSERT_TRUE(src);
  auto decode = test::make_test_engine("nano", opts_with(32));
  const int32_t free_before = decode->stats().free_blocks;
  auto rejects = [&](const kv_export& meta, std::string_view why) {
    auto plan = decode->reserve_import(r, meta);
    ASSERT_FALSE(plan) << why;
    EXPECT_TRUE(plan.error() == engine_errc::kv_mismatch) << error_text(plan.error());
    EXPECT_NE(error_text(plan.error()).find(why), std::string::npos) << error_text(plan.error());
    EXPECT_EQ(decode->stats().free_blocks, free_before) << why;
    EXPECT_EQ(decode->num_reserved_imports(), 0u) << why;
  };
  auto other_model = src->meta;
  other_model.model_fingerprint ^= 1;
  rejects(other_model, "different model");
  auto bad_hash = src->meta;
  bad_hash.block_hashes[1].lo ^= 1;
  rejects(bad_hash, "hashes");
  auto bad_tokens = src->meta;
  bad_tokens.tokens[3] ^= 1;
  rejects(bad_tokens, "hashes");
  auto bad_layout = src->meta;
  bad_layout.layout.block_tokens = 32;
  rejects(bad_layout, "layout");
  auto bad_counts = src->meta;
  bad_counts.num_computed = static_cast<int32_t>(bad_counts.tokens.size());
  rejects(bad_counts, "token counts");
  auto salted = r;
  salted.cache_salt = "tenant-b"; // the hashes name the tokens under another salt
  auto plan = decode->reserve_import(salted, src->meta);
  ASSERT_FALSE(plan);
  EXPECT_NE(error_text(plan.error()).find("hashes"), std::string::npos);
  EXPECT_TRUE(decode->reserve_import(r, src->meta)) << "the intact export still reserves";
}

TEST(KvHandoffTest, ReserveWithoutEnoughFreeBlocksKeepsNothing) {
  auto r = make_request(7, random_prompt(53, 15), 20);
  auto prefill = test::make_test_engine("nano", opts_with(64));
  prefill_held(*prefill, r);
  auto src = prefill->export_request_blocks(r.id);
  ASSERT_TRUE(src);

  // 8 blocks, all held: 4 by the same prompt (3 of them would be shared
  // with the import), 4 by another request. The import needs one fresh.
  auto decode = test::make_test_engine("nano", opts_with(8));
  prefill_held(*decode, make_request(1, r.prompt, 1));
  prefill_held(*decode, make_request(2, random_prompt(60, 2), 1));
  ASSERT_EQ(decode->stats().free_blocks, 0);
  auto plan = decode->reserve_import(r, src->meta);
  ASSERT_FALSE(plan);
  EXPECT_TRUE(plan.error() == engine_errc::no_free_blocks) << error_text(plan.error());
  EXPECT_EQ(decode->num_reserved_imports(), 0u);
  // The shared blocks were given back: releasing the holders frees all 8.
  EXPECT_TRUE(decode->release_request(1));
  EXPECT_TRUE(decode->release_request(2));
  EXPECT_EQ(decode->stats().free_blocks, 8);
  EXPECT_TRUE(decode->reserve_import(r, src->meta));
}


TEST(KvHandoffTest, StopStringSpanningPrefillAndDecodeIsCutAsOnOneEngine) {
  auto opts = opts_with();
  opts.with_tokenizer = true;
  // Find a prompt whose first token's text ends in an ASCII character and
  // whose second token's text starts with one: the stop string is those two
  // characters, so it spans the engines of a disaggregated request.
  for (uint64_t seed = 1; seed < 200; ++seed) {
    auto r = make_request(3, random_prompt(20, seed, 264), 8);
    r.params.ignore_eos = true;
    auto eng = test::make_test_engine("nano", opts);
    const auto whole = run_one(*eng, r);
    auto one = r;
    one.id = 4;
    one.params.max_tokens = 1;
    const auto first = run_one(*eng, one).text;
    const size_t n = first.size();
    if (n == 0 || whole.text.size() <= n)
      continue;
    const std::string stop = whole.text.substr(n - 1, 2);
    if (static_cast<unsigned char>(stop[0]) >= 0x80 || static_cast<unsigned char>(stop[1]) >= 0x80 ||
        whole.text.find(stop) != n - 1)
      continue;
    r.params.stop = {stop};

    const auto agg = run_one(*test::make_test_engine("nano", opts), r);
    ASSERT_EQ(agg.finish, finish_reason::stop);
    ASSERT_EQ(agg.text, whole.text.substr(0, n - 1));

    auto prefill = test::make_test_engine("nano", opts);
    auto head_req = r;
    head_req.params.max_tokens = 1;
    head_req.keep_kv = true;
    head_req.continues_elsewhere = true;
    const auto head = run_one(*prefill, head_req);
    EXPECT_EQ(head.finish, finish_reason::length);
    EXPECT_EQ(head.text, first.substr(0, n - 1)) << "the prefill keeps back what may start the stop";
    auto src = prefill->export_request_blocks(r.id);
    ASSERT_TRUE(src) << error_text(src.error());
    auto decode = test::make_test_engine("nano", opts);
    auto plan = decode->reserve_import(r, src->meta);
    ASSERT_TRUE(plan) << error_text(plan.error());
    put_blocks(*prefill, *src, *decode, *plan);
    EXPECT_TRUE(prefill->release_request(r.id));
    ASSERT_FALSE(decode->commit_import(r.id));
    const auto tail = drain(*decode)[r.id];
    EXPECT_EQ(head.text + tail.text, agg.text);
    EXPECT_EQ(tail.finish, finish_reason::stop);
    EXPECT_EQ(tail.stop_reason, stop);
    return;
  }
  FAIL() << "no prompt gave a first and second token with ASCII text";
}

} // namespace

namespace {

// Imports committed into a small pool wait holding their blocks; a request
// ahead of them (higher priority) that needs those blocks must not wait for
// them forever: their blocks are released (they recompute from the prefix
// cache), and every request still generates what it generates alone.
TEST(KvHandoffTest, WaitingImportsGiveTheirBlocksToTheRequestAhead) {
  const auto a = make_request(11, random_prompt(100, 11), 20);
  const auto b = make_request(12, random_prompt(100, 12), 20);
  const auto c = [] {
    auto r = make_request(13, random_prompt(100, 13), 20);
    r.priority = 1;
    return r;
  }();
  std::map<uint64_t, result> want;
  for (const auto* r : {&a, &b, &c})
    want[r->id] = run_one(*test::make_test_engine("nano", opts_with()), *r);

  auto prefill = test::make_test_engine("nano", opts_with());
  auto decode = test::make_test_engine("nano", opts_with(18));
  std::map<uint64_t, result> head;
  for (const auto* r : {&a, &b}) {
    head[r->id] = prefill_held(*prefill, *r);
    auto src = prefill->export_request_blocks(r->id);
    ASSERT_TRUE(src) << error_text(src.error());
    auto plan = decode->reserve_import(*r, src->meta);
    ASSERT_TRUE(plan) << error_text(plan.error());
    put_blocks(*prefill, *src, *decode, *plan);
    EXPECT_TRUE(prefill->release_request(r->id));
    ASSERT_FALSE(decode->commit_import(r->id));
  }
  EXPECT_EQ(decode->stats().free_blocks, 4) << "two imports of 7 blocks each in a pool of 18";
  ASSERT_FALSE(decode->add_request(c)) << "c needs 8 blocks for its prompt";
  auto got = drain(*decode);
  EXPECT_EQ(got[c.id], want[c.id]);
  for (const auto* r : {&a, &b})
    EXPECT_EQ(joined(head[r->id], got[r->id]), want[r->id]) << "request " << r->id;
  EXPECT_GT(decode->stats().preemptions, 0u);
}

} // namespace
