#include "engine/scheduler.hpp"

#include <memory>
#include <numeric>

#include <gtest/gtest.h>

namespace {

using namespace tessera::engine;

constexpr uint64_t seed = 12345;
constexpr kv_hash_key key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};

struct fixture {
  kv_cache cache;
  scheduler sched;
  std::vector<std::unique_ptr<sequence>> seqs;
  uint64_t arrival = 0;

  fixture(int32_t blocks, scheduler_config cfg, int32_t bt = 4)
    : cache(blocks, bt), sched(cfg, cache, key) {}

  sequence* add(int32_t prompt_len, int32_t priority = 0, int32_t first_token = 0) {
    auto s = std::make_unique<sequence>();
    s->id = seqs.size();
    s->arrival = arrival++;
    s->priority = priority;
    s->tokens.resize(prompt_len);
    std::iota(s->tokens.begin(), s->tokens.end(), first_token);
    s->prompt_len = prompt_len;
    s->hash_root = kv_hash_root(key, seed, "");
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }

  // Schedules, commits, and appends a "sampled" token to every sequence
  // that reached its end, as the engine does.
  schedule_output step() {
    auto out = sched.schedule();
    sched.commit(out);
    for (auto& s : out.seqs)
      if (s.seq->num_computed == s.seq->length())
        s.seq->tokens.push_back(7);
    return out;
  }
};

int32_t tokens_of(const schedule_output& out, const sequence* s) {
  for (auto& x : out.seqs)
    if (x.seq == s)
      return x.num_tokens;
  return 0;
}

TEST(SchedulerTest, ChunksLongPromptsWithinTheTokenBudget) {
  fixture f{64, {.max_batched_tokens = 8, .max_num_seqs = 4}};
  auto* s = f.add(20);
  EXPECT_EQ(tokens_of(f.step(), s), 8);
  EXPECT_EQ(tokens_of(f.step(), s), 8);
  EXPECT_EQ(tokens_of(f.step(), s), 4);
  EXPECT_EQ(s->num_computed, 20);
  EXPECT_EQ(tokens_of(f.step(), s), 1) << "then one token per decode step";
}

TEST(SchedulerTest, DecodesRunFirstAndPrefillsFillTheRestOfTheBudget) {
  fixture f{64, {.max_batched_tokens = 8, .max_num_seqs = 4}};
  auto* a = f.add(3);
  f.step(); // a prefilled
  auto* b = f.add(30);
  auto out = f.step();
  EXPECT_EQ(tokens_of(out, a), 1);
  EXPECT_EQ(tokens_of(out, b), 7);
  EXPECT_EQ(out.total_tokens, 8);
}

TEST(SchedulerTest, RespectsTheChunkCapAndMaxNumSeqs) {
  fixture f{64, {.max_batched_tokens = 64, .max_num_seqs = 2, .max_prefill_chunk = 5}};
  auto* a = f.add(12);
  auto* b = f.add(12);
  auto* c = f.add(12);
  auto out = f.step();
  EXPECT_EQ(tokens_of(out, a), 5);
  EXPECT_EQ(tokens_of(out, b), 5);
  EXPECT_EQ(tokens_of(out, c), 0);
  EXPECT_EQ(f.sched.num_running(), 2u);
  EXPECT_EQ(f.sched.num_waiting(), 1u);
}

TEST(SchedulerTest, ReusesCachedPrefixButAlwaysComputesTheLastToken) {
  fixture f{64, {.max_batched_tokens = 64, .max_num_seqs = 4}};
  auto* a = f.add(12); // three full blocks of 4
  f.step();
  f.sched.remove(a);
  auto* b = f.add(12); // same tokens
  auto out = f.step();
  // Blocks 0 and 1 are reused; block 2 holds the last token, recomputed.
  EXPECT_EQ(tokens_of(out, b), 4);
  EXPECT_EQ(f.cache.stats().prefix_hit_tokens, 8u);
  auto* c = f.add(14, 0, 0); // shares 3 full blocks, then 2 more tokens
  out = f.step();
  EXPECT_EQ(tokens_of(out, c), 2);
}

TEST(SchedulerTest, PreemptsTheNewestRunningSequenceWhenBlocksRunOut) {
  // 6 blocks of 4 tokens: two sequences of 12 fill them.
  fixture f{6, {.max_batched_tokens = 64, .max_num_seqs = 4}};
  auto* a = f.add(12);
  auto* b = f.add(12);
  f.step(); // both prefilled, 13 tokens each now (a sampled token appended)
  auto out = f.step();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], b) << "the newer sequence gives way";
  EXPECT_EQ(tokens_of(out, a), 1);
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_TRUE(b->blocks.empty());
  EXPECT_EQ(b->state, sequence_state::waiting);
  EXPECT_EQ(b->num_preemptions, 1);
  f.sched.remove(a);
  out = f.step(); // b resumes, recomputing prompt and generated token
  EXPECT_EQ(b->state, sequence_state::running);
  EXPECT_EQ(b->num_computed, b->length() - 1);
}

TEST(SchedulerTest, HigherPriorityWaitingSequencePreemptsALowerOne) {
  fixture f{4, {.max_batched_tokens = 64, .max_num_seqs = 4}};
  auto* low = f.add(14, 0);
  f.step();
  auto* high = f.add(6, 10, 100); // no prefix in common with low
  auto out = f.step();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], low);
  EXPECT_EQ(tokens_of(out, high), 6);
  EXPECT_EQ(tokens_of(out, low), 0);
}

// Priority holds for the token budget too: a waiting sequence above every
// running one (a health canary) runs in the next step, though running
// prefills of lower priority would fill the budget for many steps.
TEST(SchedulerTest, AWaitingSequenceAboveEveryRunningOneGetsTheBudgetFirst) {
  fixture f{64, {.max_batched_tokens = 8, .max_num_seqs = 4}};
  auto* a = f.add(40, 0);
  auto* b = f.add(40, 1, 100);
  auto out = f.step();
  EXPECT_EQ(tokens_of(out, b), 8) << "the higher of the two prefills first";
  EXPECT_EQ(f.sched.num_running(), 1u);
  auto* canary = f.add(1, 1000, 500);
  out = f.step();
  EXPECT_EQ(tokens_of(out, canary), 1) << "in the next step, not after 9 more steps of prefill";
  EXPECT_EQ(tokens_of(out, b), 7);
  EXPECT_EQ(out.total_tokens, 8);
  EXPECT_TRUE(out.preempted.empty());
  f.sched.remove(canary); // its one token out: finished
  // One not above every running sequence waits for what the budget leaves.
  auto* mid = f.add(2, 0, 700);
  out = f.step();
  EXPECT_EQ(tokens_of(out, mid), 0) << "b (priority 1) takes the budget first";
  EXPECT_EQ(tokens_of(out, b), 8);
  (void) a;
}

TEST(SchedulerTest, AdmitsWaitingSequencesByPriorityThenArrival) {
  fixture f{64, {.max_batched_tokens = 4, .max_num_seqs = 1}};
  auto* first = f.add(4, 0);
  auto* urgent = f.add(4, 5);
  auto out = f.step();
  EXPECT_EQ(tokens_of(out, urgent), 4);
  EXPECT_EQ(tokens_of(out, first), 0);
}

TEST(SchedulerTest, CopiesASharedPartialBlockBeforeWritingIt) {
  fixture f{16, {.max_batched_tokens = 64, .max_num_seqs = 4}};
  auto* a = f.add(6); // blocks: [0..3] full, [4..5] partial
  f.step();
  // A fork sharing a's computed blocks.
  auto child = std::make_unique<sequence>(*a);
  child->id = 99;
  child->arrival = f.arrival++;
  for (auto b : child->blocks)
    f.cache.retain(b);
  f.sched.add(child.get());
  auto out = f.step();
  // Both write position 6 into the shared partial block: one copy each
  // while it is shared (the second finds it unshared).
  ASSERT_EQ(out.copies.size(), 1u);
  EXPECT_NE(a->blocks[1], child->blocks[1]);
  EXPECT_EQ(a->blocks[0], child->blocks[0]) << "full blocks stay shared";
  f.sched.remove(child.get());
}

} // namespace
