// Workers in one process and across two nodes (loopback transport): a
// request generated aggregated on one worker, disaggregated (prefill on one
// worker, KV handed to another that decodes), and on one engine alone give
// the same tokens, text and logprobs. Cancels free blocks; bad requests and
// a full queue get clear errors.

#include "actors/worker/worker_actor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <random>

#include "actors/bridge/remote_actor.hpp"
#include "actors/common/token_sink.hpp"
#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/test_model.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

struct outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::string text;
  engine::finish_reason finish = engine::finish_reason::none;
  std::string failure;
  bool operator==(const outcome& o) const {
    return tokens == o.tokens && logprobs == o.logprobs && text == o.text && finish == o.finish;
  }
};

std::unique_ptr<engine::engine> make_engine(int32_t blocks = 256) {
  tessera::test::test_engine_options o;
  o.backend.num_blocks = blocks;
  o.backend.threads = 1;
  o.with_tokenizer = true;
  return tessera::test::make_test_engine("nano", o);
}

engine::request make_request(uint64_t id, int prompt_len, float temperature, int max_tokens = 12) {
  std::mt19937_64 rng{id * 7919};
  engine::request r;
  r.id = id;
  for (int i = 0; i < prompt_len; ++i)
    r.prompt.push_back(static_cast<int32_t>(8 + rng() % 500));
  r.params.temperature = temperature;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.logprobs = 0;
  r.params.seed = 17 + id;
  return r;
}

void add(outcome& o, const engine::request_output& c) {
  o.tokens.insert(o.tokens.end(), c.tokens.begin(), c.tokens.end());
  for (const auto& lp : c.logprobs)
    o.logprobs.push_back(lp.logprob);
  o.text += c.text;
  if (c.finish != engine::finish_reason::none)
    o.finish = c.finish;
}

outcome alone(const engine::request& r) {
  auto eng = make_engine();
  EXPECT_FALSE(eng->add_request(r));
  outcome o;
  while (eng->has_unfinished())
    for (const auto& c : eng->step())
      add(o, c);
  return o;
}

std::shared_ptr<const bridge_protocol> protocol() {
  auto p = std::make_shared<bridge_protocol>();
  p->add<worker_actor>().add<token_sink_actor>();
  return p;
}

/// A node with a bridge on the shared loopback fabric and its workers.
struct node {
  node(caf::actor_system& sys, const std::shared_ptr<transport::loopback_fabric>& fabric,
       std::string id)
      : sys(sys), id(std::move(id)) {
    auto t = std::make_unique<transport::loopback_transport>(fabric);
    auto* raw = t.get();
    br = std::make_unique<bridge>(sys, std::move(t), bridge_config{this->id, protocol(), 10s, {}});
    address = raw->listen("node-" + this->id + ":0").value();
  }
  ~node() {
    for (auto& w : workers)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  }
  worker_actor add_worker(const std::string& name, size_t max_waiting = 1024,
                          wire::actor_address router = {}, int32_t blocks = 256,
                          std::shared_ptr<cluster::metrics_registry> metrics = nullptr) {
    engines.push_back(make_engine(blocks));
    auto* eng = engines.back().get();
    auto region = br->register_region(eng->get_backend().kv_pool_memory()).value();
    worker_config cfg{id, name, br->actor(), region, max_waiting, 10s, router, {}, workers.size() + 1};
    cfg.metrics = std::move(metrics);
    // The worker owns its engine; keep a view for checks.
    auto owned = std::move(engines.back());
    engines.pop_back();
    views[name] = eng;
    auto w = spawn_worker(sys, std::move(owned), cfg);
    caf::anon_send(br->actor(), publish_atom_v, name, caf::actor_cast<caf::actor>(w));
    workers.push_back(w);
    return w;
  }
  caf::actor_system& sys;
  std::string id;
  std::unique_ptr<bridge> br;
  std::string address;
  std::vector<std::unique_ptr<engine::engine>> engines;
  std::map<std::string, engine::engine*> views;
  std::vector<worker_actor> workers;
};

class WorkerTest : public ::testing::Test {
protected:
  WorkerTest() : sys(cfg), self(sys), fabric(transport::loopback_fabric::make()) {}

  /// Publishes the test's own actor as "sink" on `n`: chunks come to self.
  void publish_sink(node& n) {
    caf::anon_send(n.br->actor(), publish_atom_v, std::string{"sink"},
                   caf::actor_cast<caf::actor>(self));
  }

  wire::request_handoff handoff(const engine::request& r, const std::string& sink_node,
                                wire::actor_address decode_at = {}) {
    wire::request_handoff h;
    h.request = r;
    h.reply_to = {sink_node, "sink"};
    h.decode_at = std::move(decode_at);
    return h;
  }

  caf::error generate(const worker_actor& w, const wire::request_handoff& h) {
    caf::error err;
    self->request(w, 10s, generate_atom_v, h).receive([] {}, [&](caf::error& e) { err = e; });
    return err;
  }

  /// Collects chunks until `ids` have all finished or failed.
  std::map<uint64_t, outcome> collect(std::vector<uint64_t> ids) {
    std::map<uint64_t, outcome> out;
    size_t done = 0;
    bool timed_out = false;
    while (done < ids.size() && !timed_out)
      self->receive(
        [&](token_atom, const wire::token_chunk& c) {
          add(out[c.id], c);
          if (c.finish != engine::finish_reason::none)
            ++done;
        },
        [&](failed_atom, const wire::request_cancel& c) {
          out[c.request_id].failure = c.reason;
          ++done;
        },
        caf::after(20s) >> [&] { timed_out = true; });
    EXPECT_FALSE(timed_out) << "requests did not finish";
    return out;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::shared_ptr<transport::loopback_fabric> fabric;
};

TEST_F(WorkerTest, AggregatedAndDisaggregatedEqualOneEngine) {
  node n(sys, fabric, "n");
  publish_sink(n);
  auto both = n.add_worker("both");
  auto prefill = n.add_worker("prefill");
  n.add_worker("decode");
  std::vector<engine::request> reqs;
  for (uint64_t i = 1; i <= 6; ++i)
    reqs.push_back(make_request(i, 5 + static_cast<int>(i) * 9, i % 2 ? 0.0f : 0.9f));
  std::vector<uint64_t> ids;
  for (const auto& r : reqs) {
    ASSERT_FALSE(generate(both, handoff(r, "n")));
    auto split = r;
    split.id += 100;
    ASSERT_FALSE(generate(prefill, handoff(split, "n", {"n", "decode"})));
    ids.push_back(r.id);
    ids.push_back(split.id);
  }
  auto got = collect(ids);
  for (const auto& r : reqs) {
    auto want = alone(r);
    EXPECT_EQ(want.tokens.size(), 12u);
    EXPECT_EQ(got[r.id], want) << "aggregated request " << r.id;
    EXPECT_EQ(got[r.id + 100], want) << "disaggregated request " << r.id;
    EXPECT_TRUE(got[r.id + 100].failure.empty()) << got[r.id + 100].failure;
  }
}

TEST_F(WorkerTest, DisaggregatedAcrossTwoNodesEqualsOneEngine) {
  node a(sys, fabric, "a");
  node b(sys, fabric, "b");
  publish_sink(a);
  auto prefill = a.add_worker("prefill");
  b.add_worker("decode");
  caf::error err;
  self->request(a.br->actor(), 5s, connect_atom_v, std::string{"b"}, b.address)
    .receive([] {}, [&](caf::error& e) { err = e; });
  ASSERT_FALSE(err) << error_text(err);
  auto r = make_request(9, 70, 0.7f, 20);
  ASSERT_FALSE(generate(prefill, handoff(r, "a", {"b", "decode"})));
  auto got = collect({9});
  EXPECT_TRUE(got[9].failure.empty()) << got[9].failure;
  EXPECT_EQ(got[9], alone(r));
}

TEST_F(WorkerTest, AHandOffThatDoesNotFitYetWaitsForBlocks) {
  // The decode pool holds one of these requests at a time (7 of its 8
  // blocks each): the second hand-off waits until the first is done.
  node n(sys, fabric, "n");
  publish_sink(n);
  auto prefill = n.add_worker("prefill");
  n.add_worker("decode", 1024, {}, 8);
  std::vector<engine::request> reqs{make_request(1, 60, 0.0f, 40), make_request(2, 61, 0.8f, 40)};
  for (const auto& r : reqs)
    ASSERT_FALSE(generate(prefill, handoff(r, "n", {"n", "decode"})));
  auto got = collect({1, 2});
  for (const auto& r : reqs) {
    EXPECT_TRUE(got[r.id].failure.empty()) << got[r.id].failure;
    EXPECT_EQ(got[r.id], alone(r)) << "request " << r.id;
  }
}

TEST_F(WorkerTest, PreemptedRequestsEqualOneEngineAndTheMetricsCountThePreemptions) {
  // Three requests that start in an 8-block pool (2 blocks of prompt each)
  // and need 5 blocks each by their end: the engine preempts some to let
  // the others grow. Each still equals one engine alone, and the worker's
  // metrics show the preemptions and the recompute they cost.
  node n(sys, fabric, "n");
  publish_sink(n);
  auto metrics = std::make_shared<cluster::metrics_registry>();
  auto w = n.add_worker("w", 1024, {}, 8, metrics);
  std::vector<engine::request> reqs{make_request(1, 20, 0.0f, 60), make_request(2, 21, 0.7f, 60),
                                    make_request(3, 22, 0.0f, 60)};
  for (const auto& r : reqs)
    ASSERT_FALSE(generate(w, handoff(r, "n")));
  auto got = collect({1, 2, 3});
  int64_t served = 0;
  for (const auto& r : reqs) {
    EXPECT_TRUE(got[r.id].failure.empty()) << got[r.id].failure;
    EXPECT_EQ(got[r.id], alone(r)) << "request " << r.id;
    served += static_cast<int64_t>(r.prompt.size()) + r.params.max_tokens;
  }
  const auto text = metrics->render();
  const double preemptions = tessera::test::metric_sum(text, "tessera_engine_preemptions_total");
  const double computed = tessera::test::metric_sum(text, "tessera_engine_tokens_computed_total");
  EXPECT_GE(preemptions, 1) << text;
  // Every prompt and output token once (the last sampled token's KV is never
  // computed), plus what the preemptions made it compute again.
  EXPECT_GT(computed, static_cast<double>(served - 3)) << text;
}

TEST_F(WorkerTest, AHandOffToAMissingWorkerFailsTheRequestAndFreesItsBlocks) {
  node n(sys, fabric, "n");
  publish_sink(n);
  auto prefill = n.add_worker("prefill");
  auto r = make_request(3, 40, 0.0f);
  ASSERT_FALSE(generate(prefill, handoff(r, "n", {"n", "nobody"})));
  auto got = collect({3});
  EXPECT_NE(got[3].failure.find("has no actor 'nobody'"), std::string::npos) << got[3].failure;
  EXPECT_EQ(got[3].tokens.size(), 1u) << "the first token came from the prefill";
  wire::heartbeat h;
  self->request(prefill, 5s, load_atom_v).receive([&](wire::heartbeat& x) { h = x; }, [](caf::error&) {});
  ASSERT_EQ(h.kv_usage.size(), 1u);
  EXPECT_EQ(h.kv_usage[0].used_bytes, 0u) << "the held prefill blocks were released";
}

TEST_F(WorkerTest, CancelStopsTheStreamAndFreesTheBlocks) {
  node n(sys, fabric, "n");
  publish_sink(n);
  auto w = n.add_worker("both");
  auto r = make_request(5, 30, 0.0f, 2000);
  r.params.max_tokens = 400;
  ASSERT_FALSE(generate(w, handoff(r, "n")));
  // Wait for the first token, then cancel.
  bool first = false;
  self->receive([&](token_atom, const wire::token_chunk&) { first = true; });
  ASSERT_TRUE(first);
  self->send(w, cancel_atom_v, wire::request_cancel{5, "client went away"});
  wire::heartbeat h;
  self->request(w, 5s, load_atom_v).receive([&](wire::heartbeat& x) { h = x; }, [](caf::error&) {});
  EXPECT_EQ(h.queue_depth, 0u);
  EXPECT_EQ(h.kv_usage.at(0).used_bytes, 0u);
}

TEST_F(WorkerTest, BadRequestsAndAFullQueueGetClearErrors) {
  node n(sys, fabric, "n");
  publish_sink(n);
  auto w = n.add_worker("both", 1);
  auto bad = make_request(1, 10, 0.0f);
  bad.params.top_p = 2.0f;
  auto err = generate(w, handoff(bad, "n"));
  EXPECT_TRUE(err == engine::engine_errc::bad_request) << error_text(err);
  EXPECT_NE(error_text(err).find("top_p"), std::string::npos) << error_text(err);
  // Two generates sent back to back: the second arrives while the first
  // (hundreds of steps long) holds the only slot.
  caf::error first_err, second_err;
  auto first = self->request(w, 10s, generate_atom_v, handoff(make_request(2, 10, 0.0f, 480), "n"));
  auto second = self->request(w, 10s, generate_atom_v, handoff(make_request(3, 10, 0.0f), "n"));
  first.receive([] {}, [&](caf::error& e) { first_err = e; });
  second.receive([] {}, [&](caf::error& e) { second_err = e; });
  ASSERT_FALSE(first_err) << error_text(first_err);
  err = second_err;
  EXPECT_TRUE(err == engine::engine_errc::overloaded) << error_text(err);
  EXPECT_NE(error_text(err).find("retry later"), std::string::npos);
  self->send(w, cancel_atom_v, wire::request_cancel{2, "done"});
}

TEST_F(WorkerTest, PublishesPrefixCacheChangesToTheRouterInOrder) {
  node n(sys, fabric, "n");
  publish_sink(n);
  auto w = n.add_worker("both", 1024, {"n", "sink"});
  auto r = make_request(4, 40, 0.0f, 8); // 48 tokens in all: blocks 0-1 full after the prompt
  ASSERT_FALSE(generate(w, handoff(r, "n")));
  std::vector<wire::kv_event> events;
  bool finished = false;
  bool timed_out = false;
  while (!finished && !timed_out)
    self->receive([&](token_atom, const wire::token_chunk& c) { finished = c.finish != engine::finish_reason::none; },
                  [&](kv_events_atom, const wire::kv_event& e) { events.push_back(e); },
                  caf::after(10s) >> [&] { timed_out = true; });
  // Events of the last step may trail the last token.
  while (!timed_out)
    self->receive([&](kv_events_atom, const wire::kv_event& e) { events.push_back(e); },
                  caf::after(200ms) >> [&] { timed_out = true; });
  ASSERT_FALSE(events.empty());
  size_t stored = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].worker_id, 1u);
    EXPECT_EQ(events[i].event_id, i) << "event ids count up by one from 0";
    if (events[i].kind == wire::kv_event_kind::stored)
      stored += events[i].block_hashes.size();
  }
  EXPECT_EQ(stored, 2u) << "the two full blocks of the 40-token prompt";
}

} // namespace
} // namespace tessera::actors
