// A worker's offers to its node's kv store, with actors: the engine thread
// only copies the blocks, the store's writer puts them. A store whose puts
// are held (a disk that cannot keep up) never stalls the worker's token
// stream; offers beyond the worker's bound are dropped and counted, and
// the bound frees up when the writer answers; offered blocks serve the
// next turn on another worker.

#include "actors/kvstore/kvstore_writer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include "actors/common/token_sink.hpp"
#include "actors/kvstore/kvstore_actor.hpp"
#include "actors/worker/worker_actor.hpp"
#include "kvstore/tiered_block_store.hpp"
#include "tests/actors/gated_store.hpp"
#include "tests/actors/kv_worker_node.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/test_model.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

using namespace kv_worker_node;

/// One node "n": a bridge, the test as the token sink, a gated store and
/// its writer, and the workers a test adds.
class KvOfferTest : public ::testing::Test {
protected:
  KvOfferTest() : sys(cfg), self(sys) {
    br = std::make_unique<bridge>(
      sys, std::make_unique<transport::loopback_transport>(transport::loopback_fabric::make()),
      bridge_config{"n", protocol(), 10s, {}});
    caf::anon_send(br->actor(), publish_atom_v, std::string{"sink"}, caf::actor_cast<caf::actor>(self));
    auto s = kvstore::tiered_block_store::open({});
    EXPECT_TRUE(s);
    store = std::make_shared<test::gated_store<>>(std::move(*s));
    writer = spawn_kvstore_writer(sys, store);
    block_bytes = make_engine()->get_backend().layout().block_bytes();
  }
  ~KvOfferTest() override {
    store->put_gate.release();
    store->prefix_gate.release();
    for (auto& w : workers)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    if (store_actor)
      caf::anon_send_exit(store_actor, caf::exit_reason::user_shutdown);
  }

  /// The node's kv store actor, published as "kvstore": workers added
  /// after this fetch from it.
  void start_store_actor(size_t readers = 4, size_t max_fetches_in_flight = 16,
                         wire::actor_address router = {}) {
    kvstore_config kc;
    kc.router = std::move(router);
    kc.readers = readers;
    kc.max_fetches_in_flight = max_fetches_in_flight;
    kc.metrics = metrics;
    kc.node = "n";
    kc.bridge = br->actor();
    kc.store = store;
    kc.hash_seed = make_engine()->hash_seed();
    store_actor = spawn_kvstore(sys, kc);
    caf::anon_send(br->actor(), publish_atom_v, kc.name, caf::actor_cast<caf::actor>(store_actor));
  }

  worker_actor add_worker(const std::string& name, uint64_t offer_max_bytes = uint64_t{64} << 20,
                          fetch_cost_options fetch_cost = {}) {
    std::shared_ptr<engine::engine> eng = make_engine();
    auto region = br->register_region(eng->get_backend().kv_pool_memory()).value();
    worker_config c{"n", name, br->actor(), region};
    c.worker_id = workers.size() + 1;
    c.metrics = metrics;
    c.store = store;
    c.store_writer = writer;
    c.offer_max_bytes = offer_max_bytes;
    c.fetch_cost = fetch_cost;
    if (store_actor)
      c.store_at = {"n", "kvstore"};
    auto w = spawn_worker(sys, std::move(eng), c);
    caf::anon_send(br->actor(), publish_atom_v, name, caf::actor_cast<caf::actor>(w));
    workers.push_back(w);
    return w;
  }

  /// Runs `r` on `w` to the end (the chunks come to the test).
  tessera::test::run_result run(const worker_actor& w, const engine::request& r) {
    wire::request_handoff h;
    h.request = r;
    h.reply_to = {"n", "sink"};
    caf::error err;
    self->request(w, 10s, generate_atom_v, h).receive([] {}, [&](caf::error& e) { err = e; });
    EXPECT_FALSE(err);
    std::map<uint64_t, tessera::test::run_result> out;
    bool done = false;
    while (!done)
      self->receive(
        [&](token_atom, const wire::token_chunk& c) {
          tessera::test::collect(out, {c});
          done = c.finish != engine::finish_reason::none;
        },
        [&](failed_atom, const wire::request_cancel& c) {
          ADD_FAILURE() << "request " << c.request_id << " failed: " << c.reason;
          done = true;
        },
        caf::after(20s) >> [&] {
          ADD_FAILURE() << "request " << r.id << " did not finish";
          done = true;
        });
    return out[r.id];
  }

  double metric(const std::string& series) const {
    return tessera::test::metric_value(metrics->render(), series);
  }
  /// Waits until `series` is `want` (the worker counts what the writer
  /// stored when its answer arrives); false after 10 s.
  bool wait_metric(const std::string& series, double want) const {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (metric(series) != want)
      if (std::chrono::steady_clock::now() > deadline)
        return false;
      else
        std::this_thread::sleep_for(5ms);
    return true;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::unique_ptr<bridge> br;
  std::shared_ptr<test::gated_store<>> store;
  kvstore_writer_actor writer;
  kvstore_actor store_actor;
  std::shared_ptr<cluster::metrics_registry> metrics = std::make_shared<cluster::metrics_registry>();
  std::vector<worker_actor> workers;
  size_t block_bytes = 0;
};

const std::string offered = "tessera_kvstore_offered_blocks_total{worker=\"w\"}";
const std::string dropped = "tessera_kvstore_offer_dropped_blocks_total{worker=\"w\"}";

TEST_F(KvOfferTest, TheTokenStreamGoesOnWhileTheStoreHoldsItsPuts) {
  store->put_gate.hold();
  auto w = add_worker("w");
  // 70 prompt tokens + 12 generated: 81 with KV, 5 full blocks offered.
  auto first = run(w, tessera::test::make_request(1, tessera::test::random_prompt(70, 1), 12));
  EXPECT_EQ(first.tokens.size(), 12u);
  ASSERT_TRUE(store->put_gate.wait_waiting(1, 10s)) << "the writer is in a put, held";
  const auto r = tessera::test::make_request(2, tessera::test::random_prompt(30, 2), 200);
  const auto got = run(w, r);
  EXPECT_EQ(got.tokens.size(), 200u);
  EXPECT_EQ(got, alone(r));
  EXPECT_EQ(store->put_gate.waiting(), 1u) << "request 2 streamed to its end while the put stayed held";
  EXPECT_EQ(store->put_gate.done(), 0u);
  store->put_gate.release();
  // Both offers arrive: request 1's 5 blocks and request 2's 14 (229 of
  // its 230 tokens have KV).
  EXPECT_TRUE(wait_metric(offered, 19)) << metrics->render();
  EXPECT_EQ(store->put_gate.done(), 19u);
}

TEST_F(KvOfferTest, OffersBeyondTheBoundAreDroppedAndCountedUntilTheWriterAnswers) {
  store->put_gate.hold();
  auto w = add_worker("w", 2 * block_bytes);
  (void) run(w, tessera::test::make_request(1, tessera::test::random_prompt(70, 1), 12));
  ASSERT_TRUE(store->put_gate.wait_waiting(1, 10s));
  // Of request 1's 5 blocks, the first 2 fit the bound; request 2's 5 find
  // the bound full (request 1's offer is unanswered).
  (void) run(w, tessera::test::make_request(2, tessera::test::random_prompt(70, 2), 12));
  EXPECT_EQ(metric(dropped), 8) << metrics->render();
  EXPECT_EQ(metric(offered), 0);
  store->put_gate.release();
  ASSERT_TRUE(wait_metric(offered, 2)) << metrics->render();
  EXPECT_EQ(store->put_gate.done(), 2u);
  // Answered: the bound has room again.
  (void) run(w, tessera::test::make_request(3, tessera::test::random_prompt(70, 3), 12));
  EXPECT_TRUE(wait_metric(offered, 4)) << metrics->render();
  EXPECT_EQ(metric(dropped), 11);
}

TEST_F(KvOfferTest, AStopWithABudgetOvertakesTheBacklogAndDropsWhatIsLeftAfterIt) {
  // A disk that hangs: request 1's offer waits at the gate, requests 2 and
  // 3's queue behind it in the writer's mailbox.
  store->put_gate.hold();
  auto w = add_worker("w");
  for (uint64_t id = 1; id <= 3; ++id)
    (void) run(w, tessera::test::make_request(id, tessera::test::random_prompt(70, id), 12));
  ASSERT_TRUE(store->put_gate.wait_waiting(1, 10s));
  self->monitor(writer);
  self->send<caf::message_priority::high>(writer, stop_atom_v, caf::make_timestamp() + 50ms);
  std::this_thread::sleep_for(100ms); // past the budget while request 1's puts hang
  store->put_gate.release();
  bool down = false;
  self->receive([&](const caf::down_msg&) { down = true; }, caf::after(10s) >> [] {});
  EXPECT_TRUE(down) << "the writer quit without writing the queued offers";
  // Request 1's offer (5 blocks), begun before the stop, was written whole;
  // the two queued behind it were answered unwritten.
  EXPECT_EQ(store->put_gate.done(), 5u);
  EXPECT_TRUE(wait_metric(offered, 5)) << metrics->render();
}

TEST_F(KvOfferTest, AFetchBeyondTheStoresBoundIsAnsweredBusyAndComputesAtOnce) {
  // One reader and room for one fetch in flight; the disk hangs.
  start_store_actor(1, 1);
  store->prefix_gate.hold();
  fetch_cost_options patient; // a's fetch outlives any test machine's pace
  patient.min_deadline = 60s;
  patient.max_deadline = 60s;
  auto a = add_worker("a", uint64_t{64} << 20, patient);
  auto b = add_worker("b", uint64_t{64} << 20, patient);
  // a's fetch waits at the store's reader ...
  wire::request_handoff h;
  h.request = tessera::test::make_request(1, tessera::test::random_prompt(70, 1), 4);
  h.reply_to = {"n", "sink"};
  caf::anon_send(a, generate_atom_v, h);
  ASSERT_TRUE(store->prefix_gate.wait_waiting(1, 10s));
  // ... so b's fetch finds the store at its bound, hears "busy" at once and
  // computes: b's request finishes while a's read still hangs.
  auto r = tessera::test::make_request(2, tessera::test::random_prompt(70, 2), 4);
  auto second = run(b, r);
  EXPECT_EQ(second.tokens, alone(r).tokens);
  EXPECT_EQ(store->prefix_gate.waiting(), 1u) << "b's request did not wait for the hung read";
  EXPECT_EQ(metric("tessera_kvstore_fetch_total{worker=\"b\",outcome=\"rejected\"}"), 1);
  // The disk comes back: a's fetch ends (a miss) and a's request runs.
  store->prefix_gate.release();
  bool done = false;
  while (!done)
    self->receive([&](token_atom, const wire::token_chunk& c) { done = c.finish != engine::finish_reason::none; },
                  [&](failed_atom, const wire::request_cancel& c) {
                    ADD_FAILURE() << c.reason;
                    done = true;
                  },
                  caf::after(20s) >> [&] {
                    ADD_FAILURE() << "a's request did not finish";
                    done = true;
                  });
  EXPECT_TRUE(wait_metric("tessera_kvstore_fetch_total{worker=\"a\",outcome=\"miss\"}", 1));
  EXPECT_TRUE(wait_metric("tessera_kvstore_fetch_rejected_total", 1)) << "the store's own count (per heartbeat)";
}

TEST_F(KvOfferTest, AFetchPastItsDeadlineComputesAndAStoreMeasuredSlowIsSkipped) {
  start_store_actor();
  store->prefix_gate.hold(); // the disk hangs
  fetch_cost_options fc;
  fc.min_deadline = fc.max_deadline = 300ms;
  auto w = add_worker("w", uint64_t{64} << 20, fc);
  // The first fetch waits out its deadline, then the request is computed.
  const auto started = std::chrono::steady_clock::now();
  auto r1 = tessera::test::make_request(1, tessera::test::random_prompt(70, 1), 4);
  EXPECT_EQ(run(w, r1).tokens, alone(r1).tokens);
  EXPECT_GE(std::chrono::steady_clock::now() - started, 300ms);
  EXPECT_EQ(metric("tessera_kvstore_fetch_total{worker=\"w\",outcome=\"late\"}"), 1) << metrics->render();
  // The store took 300 ms or more; computing 70 tokens takes this engine
  // far less: the next prompt is computed without asking the store.
  auto r2 = tessera::test::make_request(2, tessera::test::random_prompt(70, 2), 4);
  EXPECT_EQ(run(w, r2).tokens, alone(r2).tokens);
  EXPECT_EQ(metric("tessera_kvstore_fetch_total{worker=\"w\",outcome=\"skipped\"}"), 1) << metrics->render();
  EXPECT_EQ(store->prefix_gate.waiting(), 1u) << "only the first fetch reached the store";
  // The hung read ends after its request was computed: its answer is
  // dropped and the worker goes on.
  store->prefix_gate.release();
  auto r3 = tessera::test::make_request(3, tessera::test::random_prompt(30, 3), 4);
  EXPECT_EQ(run(w, r3).tokens, alone(r3).tokens);
}

TEST_F(KvOfferTest, AStoreAskedByTheRouterAnnouncesEveryBlockAgain) {
  auto w = add_worker("w");
  (void) run(w, tessera::test::make_request(1, tessera::test::random_prompt(70, 1), 12));
  ASSERT_TRUE(wait_metric(offered, 5)) << metrics->render();
  // The test is the router: it hears the store's join and events.
  start_store_actor(4, 16, {"n", "sink"});
  std::set<engine::kv_block_hash> announced;
  auto collect = [&](std::chrono::milliseconds within, bool stop_at_cleared) {
    bool cleared = false;
    const auto until = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < until && !(stop_at_cleared && cleared))
      self->receive(
        [&](kv_events_atom, const wire::kv_event& ev) {
          if (ev.kind == wire::kv_event_kind::cleared) {
            cleared = true;
            announced.clear();
          } else if (ev.kind == wire::kv_event_kind::stored) {
            announced.insert(ev.block_hashes.begin(), ev.block_hashes.end());
          }
        },
        [](join_atom, const wire::worker_join&) {}, [](heartbeat_atom, const wire::heartbeat&) {},
        caf::after(50ms) >> [] {});
    return cleared;
  };
  (void) collect(1s, false);
  ASSERT_EQ(announced.size(), 5u) << "the store announces what it holds when it starts";
  caf::anon_send(store_actor, kv_events_atom_v); // as the router does after a gap
  ASSERT_TRUE(collect(5s, true)) << "a resync starts with cleared";
  (void) collect(1s, false);
  EXPECT_EQ(announced.size(), 5u) << "then every block again";
}

TEST_F(KvOfferTest, ABoundOfZeroOffersNothing) {
  auto w = add_worker("w", 0);
  (void) run(w, tessera::test::make_request(1, tessera::test::random_prompt(70, 1), 12));
  EXPECT_EQ(metric(dropped), 5) << metrics->render();
  EXPECT_EQ(metric(offered), 0);
  EXPECT_EQ(store->put_gate.done(), 0u);
}

TEST_F(KvOfferTest, OfferedBlocksServeTheNextTurnOnAnotherWorker) {
  start_store_actor();
  auto a = add_worker("w");
  const auto prompt = tessera::test::random_prompt(70, 1);
  const auto first = run(a, tessera::test::make_request(1, prompt, 12));
  ASSERT_TRUE(wait_metric(offered, 5)) << metrics->render();
  EXPECT_EQ(store->put_gate.done(), 5u);

  // The next turn on a worker whose pool never saw the conversation: its
  // first 90 tokens (5 full blocks) come from the store.
  auto next = prompt;
  next.insert(next.end(), first.tokens.begin(), first.tokens.end());
  for (int32_t t : tessera::test::random_prompt(9, 4))
    next.push_back(t);
  auto b = add_worker("b");
  const auto r = tessera::test::make_request(2, next, 8);
  const auto got = run(b, r);
  EXPECT_EQ(got, alone(r));
  EXPECT_EQ(got.cached_prompt_tokens, 80);
  EXPECT_EQ(metric("tessera_kvstore_fetched_blocks_total{worker=\"b\"}"), 5) << metrics->render();
  EXPECT_EQ(store->stats().host.hits, 5u);
  EXPECT_EQ(metric(dropped), 0);
}

} // namespace
} // namespace tessera::actors
