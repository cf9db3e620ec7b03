// A request whose logits turn NaN fails alone, with an error naming the
// cause; the engine keeps serving the others. The NaN comes from the
// request's KV blocks overwritten in the pool, as a bad transfer or a memory
// fault would leave them.
#include <cstddef>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;

using test::make_request;
using test::random_prompt;
using test::run_one;

test::test_engine_options options() {
  test::test_engine_options o;
  o.backend.num_blocks = 64;
  return o;
}

// Overwrites every KV block of request `id` with all-ones bytes: NaN in f32,
// f16 and bf16 alike.
void poison_kv(engine::engine& eng, uint64_t id) {
  auto held = eng.export_request_blocks(id);
  ASSERT_TRUE(held) << error_text(held.error());
  ASSERT_FALSE(held->blocks.empty());
  const std::vector<std::byte> nan_bytes(eng.get_backend().layout().block_bytes(), std::byte{0xff});
  for (const kv_block_id b : held->blocks)
    eng.get_backend().write_block(b, nan_bytes);
}

// Everything requests produced, and the errors they ended with.
struct outcome {
  std::map<uint64_t, test::run_result> results;
  std::map<uint64_t, caf::error> errors;

  void add(const std::vector<request_output>& step) {
    test::collect(results, step);
    for (const auto& o : step) {
      if (o.error) {
        EXPECT_FALSE(errors.contains(o.id)) << "request " << o.id << " failed twice";
        EXPECT_EQ(o.finish, finish_reason::abort) << "an error ends the request";
        EXPECT_TRUE(o.tokens.empty()) << "a failed step produces no token";
        errors[o.id] = o.error;
      }
    }
  }
};

TEST(EngineBadLogitsTest, NaNLogitsFailThatRequestAndTheOthersFinishAsAlone) {
  const auto victim = make_request(1, random_prompt(40, 1), 12);
  const auto bystander = make_request(2, random_prompt(23, 2), 12, 0.8f);
  const auto alone = run_one(*test::make_test_engine("nano", options()), bystander);
  ASSERT_EQ(alone.tokens.size(), 12u);

  auto eng = test::make_test_engine("nano", options());
  ASSERT_FALSE(eng->add_request(victim));
  ASSERT_FALSE(eng->add_request(bystander));
  outcome got;
  got.add(eng->step()); // both prompts, and each one's first token
  ASSERT_EQ(got.results[1].tokens.size(), 1u);
  ASSERT_EQ(got.results[2].tokens.size(), 1u);
  poison_kv(*eng, 1);
  for (int guard = 0; eng->has_unfinished() && guard < 1000; ++guard)
    got.add(eng->step());
  ASSERT_FALSE(eng->has_unfinished());

  ASSERT_TRUE(got.errors.contains(1)) << "the poisoned request did not fail";
  const caf::error& err = got.errors[1];
  EXPECT_TRUE(err == engine_errc::bad_logits) << error_text(err);
  // The logits of its first output token, at position 40, are the first
  // computed over the poisoned KV.
  EXPECT_EQ(error_message(err),
            "request 1: logits contain NaN (first at token id 0 of 512) at position 40 "
            "(corrupt KV cache or weights)");
  EXPECT_EQ(got.results[1].finish, finish_reason::abort);
  EXPECT_EQ(got.results[1].tokens.size(), 1u);

  EXPECT_FALSE(got.errors.contains(2)) << error_text(got.errors[2]);
  EXPECT_EQ(got.results[2], alone);

  // The failed request's blocks went back to the pool.
  const auto st = eng->stats();
  EXPECT_EQ(st.free_blocks, st.num_blocks);
}

TEST(EngineBadLogitsTest, ARetryAfterTheFailureRecomputesTheSuspectPrefix) {
  // 40 tokens: two full blocks of 16, cached by the prefix cache as the
  // prompt is computed, and then poisoned.
  const auto prompt = random_prompt(40, 3);
  auto eng = test::make_test_engine("nano", options());
  ASSERT_FALSE(eng->add_request(make_request(1, prompt)));
  outcome got;
  got.add(eng->step());
  poison_kv(*eng, 1);
  for (int guard = 0; eng->has_unfinished() && guard < 1000; ++guard)
    got.add(eng->step());
  ASSERT_TRUE(got.errors.contains(1));

  // Reusing the cached blocks would fail the retry the same way.
  const auto retry = run_one(*eng, make_request(3, prompt));
  EXPECT_EQ(retry, run_one(*test::make_test_engine("nano", options()), make_request(3, prompt)));
  EXPECT_EQ(retry.finish, finish_reason::length);
  EXPECT_EQ(retry.cached_prompt_tokens, 0);
}

TEST(EngineBadLogitsTest, AHeldRequestThatFailsIsNotKeptForExport) {
  auto r = make_request(1, random_prompt(20, 4), 8);
  r.keep_kv = true;
  auto eng = test::make_test_engine("nano", options());
  ASSERT_FALSE(eng->add_request(r));
  outcome got;
  got.add(eng->step());
  poison_kv(*eng, 1);
  for (int guard = 0; eng->has_unfinished() && guard < 1000; ++guard)
    got.add(eng->step());
  ASSERT_TRUE(got.errors.contains(1));
  EXPECT_FALSE(eng->export_request_blocks(1)) << "a failed request's suspect KV is still held";
  EXPECT_FALSE(eng->release_request(1));
  const auto st = eng->stats();
  EXPECT_EQ(st.free_blocks, st.num_blocks);
}

} // namespace
