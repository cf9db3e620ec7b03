// The prefix fetch's failure modes that kv_offer_test (a store at its
// bound, a hung read past the worker's deadline, with an empty store) does
// not reach, each made real at the level where it is cheapest: a node's
// tiered store over a RocksDB whose file system fails reads (fault_fs)
// behind a real kvstore actor and workers; a reader slower than the
// store actor's read_timeout; and an answer carrying blocks that arrives
// after its request was computed. Every output must equal one engine's
// without any cache.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "actors/common/token_sink.hpp"
#include "actors/kvstore/kvstore_actor.hpp"
#include "actors/kvstore/kvstore_writer.hpp"
#include "actors/worker/worker_actor.hpp"
#include "common/error.hpp"
#include "kvstore/tiered_block_store.hpp"
#include "tests/actors/gated_store.hpp"
#include "tests/actors/kv_worker_node.hpp"
#include "tests/kvstore/fault_fs.hpp"
#include "tests/kvstore/kv_test_blocks.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::actors {
namespace {

using namespace std::chrono_literals;
namespace wire = transport::wire;

using namespace kv_worker_node;

/// One node "n": a bridge, the test as the token sink, a tiered store of
/// two blocks in host memory over RocksDB on a fault_fs, its writer and
/// actor, and the workers a test adds.
class KvFetchFaultsTest : public ::testing::Test {
protected:
  KvFetchFaultsTest() : sys(cfg), self(sys) {
    br = std::make_unique<bridge>(
      sys, std::make_unique<transport::loopback_transport>(transport::loopback_fabric::make()),
      bridge_config{"n", protocol(), 10s, {}});
    caf::anon_send(br->actor(), publish_atom_v, std::string{"sink"}, caf::actor_cast<caf::actor>(self));
    block_bytes = make_engine()->get_backend().layout().block_bytes();
    kvstore::tiered_store_options o;
    o.host_capacity_bytes = 2 * (block_bytes + kvstore::host_tier::entry_overhead_bytes);
    o.disk = kvstore::rocksdb_tier_options{};
    o.disk->dir = dir.path();
    o.disk->min_blob_size = 256;
    o.disk->env = test::fault_fs::env_for(fs);
    auto s = kvstore::tiered_block_store::open(o);
    EXPECT_TRUE(s) << error_text(s.error());
    store = std::make_shared<test::gated_store<kvstore::tiered_block_store>>(std::move(*s));
    writer = spawn_kvstore_writer(sys, store);
  }
  ~KvFetchFaultsTest() override {
    store->prefix_gate.release();
    for (auto& w : workers)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
    if (store_actor)
      caf::anon_send_exit(store_actor, caf::exit_reason::user_shutdown);
  }

  void start_store_actor(size_t readers = 4, size_t max_fetches_in_flight = 16,
                         std::chrono::milliseconds read_timeout = 30s) {
    kvstore_config kc;
    kc.readers = readers;
    kc.max_fetches_in_flight = max_fetches_in_flight;
    kc.read_timeout = read_timeout;
    kc.metrics = metrics;
    kc.node = "n";
    kc.bridge = br->actor();
    kc.store = store;
    kc.hash_seed = make_engine()->hash_seed();
    store_actor = spawn_kvstore(sys, kc);
    caf::anon_send(br->actor(), publish_atom_v, kc.name, caf::actor_cast<caf::actor>(store_actor));
  }

  /// A worker on node "n" offering to and (unless `fetches` is false)
  /// fetching from its store.
  worker_actor add_worker(const std::string& name, fetch_cost_options fetch_cost = {},
                          uint64_t offer_max_bytes = uint64_t{64} << 20,
                          uint64_t fetch_max_bytes = uint64_t{16} << 20, bool fetches = true) {
    std::shared_ptr<engine::engine> eng = make_engine();
    auto region = br->register_region(eng->get_backend().kv_pool_memory()).value();
    worker_config c{"n", name, br->actor(), region};
    c.worker_id = workers.size() + 1;
    c.metrics = metrics;
    c.store = store;
    c.store_writer = writer;
    c.fetch_cost = fetch_cost;
    c.offer_max_bytes = offer_max_bytes;
    c.fetch_max_bytes = fetch_max_bytes;
    if (fetches)
      c.store_at = {"n", "kvstore"};
    auto w = spawn_worker(sys, std::move(eng), c);
    caf::anon_send(br->actor(), publish_atom_v, name, caf::actor_cast<caf::actor>(w));
    workers.push_back(w);
    return w;
  }

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
          done = c.id == r.id && c.finish != engine::finish_reason::none;
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
  bool wait_metric(const std::string& series, double want) const {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (metric(series) != want)
      if (std::chrono::steady_clock::now() > deadline)
        return false;
      else
        std::this_thread::sleep_for(5ms);
    return true;
  }

  /// Puts blocks 0, 1, 2 (test::key_of) in the store and returns a fetch of
  /// their chain.
  wire::kv_fetch_request store_three_blocks() {
    wire::kv_fetch_request req;
    req.ns = test::test_ns;
    for (uint64_t i = 0; i < 3; ++i) {
      const auto k = test::key_of(i);
      EXPECT_FALSE(store->put(k, test::block_for(k)));
      req.block_hashes.push_back(k.hash);
    }
    req.max_bytes = uint64_t{1} << 20;
    return req;
  }

  /// Asks the store actor for `req` and waits for its answer.
  wire::kv_fetch_reply fetch(const wire::kv_fetch_request& req) {
    wire::kv_fetch_reply reply;
    caf::error err;
    self->request(store_actor, 10s, fetch_atom_v, req)
      .receive([&](wire::kv_fetch_reply& r) { reply = std::move(r); }, [&](caf::error& e) { err = e; });
    EXPECT_FALSE(err) << to_string(err);
    return reply;
  }

  /// Turn 1 on worker "w1": `prompt_tokens` (default 70) prompt tokens +
  /// 4 generated, so (prompt_tokens + 3) / 16 full blocks (4) are offered;
  /// the store keeps the last 2 in host memory and spills the others to
  /// disk, flushed to files (reads go to the file system). Returns the
  /// next turn's prompt: turn 1's tokens + 30 new.
  ///
  /// w1 does not fetch: there is nothing to fetch yet, and a fetch it gave
  /// up on (a slow first answer, seen under AddressSanitizer) would still
  /// be read by the store, possibly after these blocks are stored; that
  /// read promotes the disk blocks and spills the host ones, so the tiers
  /// would no longer hold what the tests expect.
  std::vector<int32_t> store_turn_one(size_t prompt_tokens = 70) {
    auto w1 = add_worker("w1", {}, uint64_t{64} << 20, uint64_t{16} << 20, false);
    auto first = tessera::test::random_prompt(prompt_tokens, 1);
    const size_t offered = (prompt_tokens + 3) / 16;
    (void)run(w1, tessera::test::make_request(1, first, 4));
    EXPECT_TRUE(wait_metric("tessera_kvstore_offered_blocks_total{worker=\"w1\"}", static_cast<double>(offered)))
      << metrics->render();
    EXPECT_TRUE(store->inner().wait_spilled(10s));
    EXPECT_FALSE(store->inner().disk()->flush());
    const auto s = store->stats();
    EXPECT_EQ(s.disk.blocks, offered - 2);
    EXPECT_EQ(s.host.blocks, 2u);
    auto next = first;
    auto more = tessera::test::random_prompt(30, 2);
    next.insert(next.end(), more.begin(), more.end());
    return next;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  std::unique_ptr<bridge> br;
  test::temp_dir dir{"tessera-kv-fetch-faults"};
  std::shared_ptr<test::fault_fs> fs = std::make_shared<test::fault_fs>();
  std::shared_ptr<test::gated_store<kvstore::tiered_block_store>> store;
  kvstore_writer_actor writer;
  kvstore_actor store_actor;
  std::shared_ptr<cluster::metrics_registry> metrics = std::make_shared<cluster::metrics_registry>();
  std::vector<worker_actor> workers;
  size_t block_bytes = 0;
};

std::string fetches(const std::string& worker, const std::string& outcome) {
  return "tessera_kvstore_fetch_total{worker=\"" + worker + "\",outcome=\"" + outcome + "\"}";
}

// A disk that fails its reads: the prefix's first blocks are on disk, so
// the fetch brings nothing; the request is computed (right), the errors are
// counted, and once the disk reads again the same prefix comes back.
TEST_F(KvFetchFaultsTest, ADiskFailingReadsIsComputedAroundAndRecovers) {
  start_store_actor();
  const auto next = store_turn_one();
  fs->fail_reads = true;
  // The fetches' outcomes are what this test checks, not their deadlines:
  // a generous one, so that a slow host (a sanitizer build's first read
  // took over the default 250 ms) does not turn a miss into a timeout.
  fetch_cost_options fc;
  fc.min_deadline = 10s;
  // w2 offers nothing: the store keeps only turn 1's blocks.
  auto w2 = add_worker("w2", fc, 0);
  const auto r2 = tessera::test::make_request(2, next, 6);
  EXPECT_EQ(run(w2, r2).tokens, alone(r2).tokens);
  EXPECT_EQ(metric(fetches("w2", "miss")), 1) << metrics->render();
  EXPECT_GE(store->stats().disk.io_errors, 1u);
  EXPECT_GE(fs->injected.load(), 1u);
  EXPECT_EQ(store->stats().disk.blocks, 2u) << "a read error keeps the blocks (it may pass)";

  fs->fail_reads = false;
  auto w3 = add_worker("w3", fc);
  const auto r3 = tessera::test::make_request(3, next, 6);
  EXPECT_EQ(run(w3, r3).tokens, alone(r3).tokens);
  // The store held 4 of the prompt's 6 full blocks: all 4 came.
  EXPECT_EQ(metric(fetches("w3", "partial")), 1) << metrics->render();
  EXPECT_EQ(metric("tessera_kvstore_fetched_blocks_total{worker=\"w3\"}"), 4);
  EXPECT_GE(store->stats().disk.hits, 2u);
}

// A reader slower than the store actor's read_timeout: the fetch is
// answered empty when it runs out, and its place in the bound is given
// back, so the next fetch is read (not answered busy) once the disk moves.
TEST_F(KvFetchFaultsTest, AReadPastTheStoresReadTimeoutIsAnsweredEmptyAndFreesItsPlace) {
  start_store_actor(1, 1, 200ms);
  const auto req = store_three_blocks();
  store->prefix_gate.hold();
  const auto started = std::chrono::steady_clock::now();
  auto first = fetch(req);
  EXPECT_GE(std::chrono::steady_clock::now() - started, 200ms);
  EXPECT_TRUE(first.blocks.empty());
  EXPECT_FALSE(first.busy) << "answered empty by the timeout, not refused";
  ASSERT_TRUE(store->prefix_gate.wait_waiting(1, 5s));
  store->prefix_gate.release();
  ASSERT_TRUE(store->prefix_gate.wait_done(1, 5s));
  // The bound is one fetch: had the timed-out one kept its place, this one
  // would be answered busy.
  auto second = fetch(req);
  EXPECT_FALSE(second.busy);
  ASSERT_EQ(second.blocks.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(second.blocks[i].data, *test::block_for(test::key_of(i)).payload) << i;
}

// A fetch whose asker stopped waiting for it (wait_ms) before a reader
// took it: the store answers it empty when the wait runs out, and when the
// reader comes to it (after a read that held it up) it does not read it,
// since a read would only promote blocks between the tiers for nobody; it
// is counted, and the store goes on serving.
TEST_F(KvFetchFaultsTest, AFetchItsAskerStoppedWaitingForIsAnsweredUnread) {
  start_store_actor(1, 4);
  const auto patient = store_three_blocks();
  auto hasty = patient;
  hasty.wait_ms = 100;
  store->prefix_gate.hold();
  auto first = self->request(store_actor, 10s, fetch_atom_v, patient);
  ASSERT_TRUE(store->prefix_gate.wait_waiting(1, 5s)) << "the one reader is reading the first fetch";
  const auto sent = std::chrono::steady_clock::now();
  const auto second = fetch(hasty);
  EXPECT_GE(std::chrono::steady_clock::now() - sent, 100ms);
  EXPECT_TRUE(second.blocks.empty());
  EXPECT_FALSE(second.busy) << "answered empty at the end of its wait, not refused";
  store->prefix_gate.release();
  wire::kv_fetch_reply one;
  first.receive([&](wire::kv_fetch_reply& r) { one = std::move(r); },
                [&](caf::error& e) { ADD_FAILURE() << to_string(e); });
  EXPECT_EQ(one.blocks.size(), 3u);
  EXPECT_TRUE(wait_metric("tessera_kvstore_fetch_expired_total", 1)) << metrics->render();
  EXPECT_EQ(store->prefix_gate.done(), 1u) << "the second fetch was not read";
  // A fetch that says nothing of its wait is read as before.
  EXPECT_EQ(fetch(patient).blocks.size(), 3u);
  EXPECT_EQ(store->prefix_gate.done(), 2u);
  // Where the time went: three fetches waited for the reader, two were
  // read; the second waited at least its 100 ms, and the first's read took
  // as long as the gate held it.
  const auto text = metrics->render();
  const auto stage = [&](const char* name, const char* series) {
    return tessera::test::metric_value(
      text, std::string{"tessera_kvstore_fetch_stage_seconds_"} + series + "{stage=\"" + name + "\"}");
  };
  EXPECT_EQ(stage("queued", "count"), 3) << text;
  EXPECT_EQ(stage("read", "count"), 2) << text;
  EXPECT_GE(stage("queued", "sum"), 0.1) << text;
  EXPECT_GE(stage("read", "sum"), 0.1) << text;
}

// The answer to a fetch arrives, carrying the prefix's blocks, after the
// worker gave up on it (its deadline passed) and computed the request: the
// worker keeps serving, and what it computes next is still right.
TEST_F(KvFetchFaultsTest, BlocksArrivingAfterTheRequestWasComputedBreakNothing) {
  start_store_actor();
  const auto next = store_turn_one();
  // Turn 1's worker may have asked the (then empty) store too.
  const size_t reads_before = store->prefix_gate.done();
  store->prefix_gate.hold();
  fetch_cost_options fc;
  fc.min_deadline = fc.max_deadline = 300ms;
  auto w2 = add_worker("w2", fc);
  const auto r2 = tessera::test::make_request(2, next, 6);
  EXPECT_EQ(run(w2, r2).tokens, alone(r2).tokens);
  EXPECT_EQ(metric(fetches("w2", "late")), 1) << metrics->render();
  ASSERT_TRUE(store->prefix_gate.wait_waiting(1, 5s));
  store->prefix_gate.release();
  ASSERT_TRUE(store->prefix_gate.wait_done(reads_before + 1, 5s))
    << "waiting " << store->prefix_gate.waiting() << ", done " << store->prefix_gate.done();
  std::this_thread::sleep_for(100ms); // the late answer reaches the worker
  // The same prompt again (its blocks are in w2's pool now, computed), then
  // a longer turn on top of it, then an unrelated prompt.
  const auto r3 = tessera::test::make_request(3, next, 6);
  EXPECT_EQ(run(w2, r3).tokens, alone(r3).tokens);
  auto longer = next;
  auto more = tessera::test::random_prompt(40, 3);
  longer.insert(longer.end(), more.begin(), more.end());
  const auto r4 = tessera::test::make_request(4, longer, 6);
  EXPECT_EQ(run(w2, r4).tokens, alone(r4).tokens);
  const auto r5 = tessera::test::make_request(5, tessera::test::random_prompt(50, 5), 6);
  EXPECT_EQ(run(w2, r5).tokens, alone(r5).tokens);
}

// A prefix comes in chunks (here 2 blocks per reply), each imported into
// the pool as it lands. The store answers two chunks, then hangs: the
// fetch runs past its deadline, keeps the 4 blocks that came and computes
// only the rest, and the output is the uncached one, token for token.
TEST_F(KvFetchFaultsTest, AFetchCutAfterTwoChunksKeepsThemAndComputesTheRest) {
  start_store_actor();
  const auto next = store_turn_one(170); // the store holds 10 of turn 2's 12 blocks
  const size_t reads_before = store->prefix_gate.done();
  fetch_cost_options fc;
  fc.min_deadline = fc.max_deadline = 400ms;
  auto w2 = add_worker("w2", fc, 0, 2 * block_bytes);
  store->prefix_gate.hold_after(2);
  const auto r2 = tessera::test::make_request(2, next, 6);
  EXPECT_EQ(run(w2, r2).tokens, alone(r2).tokens);
  EXPECT_EQ(metric(fetches("w2", "partial")), 1) << metrics->render();
  EXPECT_EQ(metric("tessera_kvstore_fetched_blocks_total{worker=\"w2\"}"), 4) << metrics->render();
  ASSERT_TRUE(store->prefix_gate.wait_waiting(1, 5s)) << "the third chunk's read waits at the gate";
  store->prefix_gate.release();
  ASSERT_TRUE(store->prefix_gate.wait_done(reads_before + 3, 5s))
    << "waiting " << store->prefix_gate.waiting() << ", done " << store->prefix_gate.done();
  std::this_thread::sleep_for(100ms); // the late third chunk reaches the worker, which ignores it
  // The blocks the pool kept and those it computed serve the next turn.
  auto longer = next;
  auto more = tessera::test::random_prompt(20, 3);
  longer.insert(longer.end(), more.begin(), more.end());
  const auto r3 = tessera::test::make_request(3, longer, 6);
  EXPECT_EQ(run(w2, r3).tokens, alone(r3).tokens);
}

// The store's disk starts failing after two chunks: the third comes back
// empty, the fetch ends at once (no deadline waited out) with the 4 blocks
// it has, and the rest is computed.
TEST_F(KvFetchFaultsTest, AStoreFailingAfterTwoChunksKeepsThemAndComputesTheRest) {
  start_store_actor();
  const auto next = store_turn_one(170);
  fetch_cost_options fc;
  fc.min_deadline = fc.max_deadline = 20s;
  auto w2 = add_worker("w2", fc, 0, 2 * block_bytes);
  store->prefix_gate.hold_after(2);
  std::thread breaker{[&] {
    if (store->prefix_gate.wait_waiting(1, 10s))
      fs->fail_reads = true; // blocks 4-5 are on disk only (host memory holds two of the first four)
    store->prefix_gate.release();
  }};
  const auto started = std::chrono::steady_clock::now();
  const auto r2 = tessera::test::make_request(2, next, 6);
  EXPECT_EQ(run(w2, r2).tokens, alone(r2).tokens);
  breaker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s) << "the fetch waited for its deadline";
  EXPECT_EQ(metric(fetches("w2", "partial")), 1) << metrics->render();
  EXPECT_EQ(metric("tessera_kvstore_fetched_blocks_total{worker=\"w2\"}"), 4) << metrics->render();
  EXPECT_GE(fs->injected.load(), 1u);
}

} // namespace
} // namespace tessera::actors
