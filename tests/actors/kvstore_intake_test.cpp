// A store node's intake (actors/kvstore/kvstore_intake.hpp): what it makes
// of an offer that crossed the wire (offer_from_wire) and what it refuses,
// and the actor in front of a real store and writer: a good offer is
// stored and served by read_chain exactly as offered; a bad one (another
// layout, a flipped byte, a short block) stores nothing; past its bound an
// offer is answered busy at once.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/kvstore/kvstore_actor.hpp"
#include "actors/kvstore/kvstore_intake.hpp"
#include "actors/worker/remote_offers.hpp"
#include "kvstore/tiered_block_store.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
namespace wire = transport::wire;

/// The blocks a nano engine holds after a 70-token prompt and 12 tokens,
/// copied for a remote store (5 full blocks).
struct Offered {
  Offered() {
    test::test_engine_options o;
    o.backend.num_blocks = 64;
    eng = test::make_test_engine("nano", o);
    auto done = test::run_one(*eng, test::make_request(1, prompt, 12)).tokens;
    seq = prompt;
    seq.insert(seq.end(), done.begin(), done.end());
    auto c = actors::copy_remote_offer(*eng, actors::remote_store_memory{}, seq, {}, uint64_t{1} << 30,
                                       uint64_t{1} << 30);
    if (c.offers.size() == 1)
      offer = std::move(c.offers[0]);
  }
  std::vector<int32_t> prompt = test::random_prompt(70, 3);
  std::vector<int32_t> seq;
  std::unique_ptr<engine::engine> eng;
  wire::kv_fetch_reply offer;
};

TEST(KvstoreIntakeTest, AGoodOfferBecomesTheWritersOfferInTheStoresNamespace) {
  Offered o;
  ASSERT_EQ(o.offer.blocks.size(), 5u);
  const auto& layout = o.eng->get_backend().layout();
  auto k = actors::offer_from_wire(o.offer, o.eng->hash_seed(), layout);
  ASSERT_TRUE(k) << caf::to_string(k.error());
  EXPECT_EQ(k->ns, o.eng->hash_seed());
  ASSERT_EQ(k->blocks.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(k->blocks[i].hash, o.offer.blocks[i].hash);
    EXPECT_EQ(*k->blocks[i].block.payload, o.offer.blocks[i].data);
    EXPECT_TRUE(kvstore::verify_block(k->blocks[i].block));
  }
}

TEST(KvstoreIntakeTest, ABadOfferIsRefusedNamingWhy) {
  Offered o;
  ASSERT_EQ(o.offer.blocks.size(), 5u);
  const auto& layout = o.eng->get_backend().layout();
  const auto ns = o.eng->hash_seed();
  auto refused = [&](wire::kv_fetch_reply m, const std::string& words) {
    auto k = actors::offer_from_wire(m, ns, layout);
    ASSERT_FALSE(k) << words;
    EXPECT_NE(caf::to_string(k.error()).find(words), std::string::npos) << caf::to_string(k.error());
  };
  auto m = o.offer;
  m.layout.num_layers += 1;
  refused(m, "is not the store's");
  m = o.offer;
  m.layout.kv_dtype = engine::dtype::f32;
  refused(m, "is not the store's");
  m = o.offer;
  m.blocks[3].data[100] ^= std::byte{1};
  refused(m, "block 3's bytes do not match its checksum");
  m = o.offer;
  m.blocks[1].token_count = 7;
  refused(m, "block 1 holds 7 tokens");
  m = o.offer;
  m.blocks[2].data.pop_back();
  refused(m, "block 2 has");
  m = o.offer;
  m.more = true;
  refused(m, "neither busy nor more");
  m = o.offer;
  m.blocks.clear();
  refused(m, "holds no block");
}

struct IntakeActorTest : ::testing::Test {
  void SetUp() override {
    auto s = kvstore::tiered_block_store::open({});
    ASSERT_TRUE(s);
    store = std::shared_ptr<kvstore::block_store>{std::move(*s)};
    writer = actors::spawn_kvstore_writer(sys, store);
  }
  void TearDown() override {
    caf::anon_send(writer, actors::stop_atom_v);
    if (intake)
      caf::anon_send_exit(intake, caf::exit_reason::user_shutdown);
  }
  actors::kvstore_intake_actor start(const Offered& o, uint64_t max_bytes = uint64_t{256} << 20) {
    actors::kvstore_intake_config c;
    c.writer = writer;
    c.ns = o.eng->hash_seed();
    c.layout = o.eng->get_backend().layout();
    c.max_bytes_in_flight = max_bytes;
    c.metrics = metrics;
    intake = actors::spawn_kvstore_intake(sys, c);
    return intake;
  }
  /// Sends `m`; the error text, or "" when it was stored.
  std::string send(const wire::kv_fetch_reply& m) {
    caf::scoped_actor self{sys};
    std::string out = "no answer";
    self->request(intake, std::chrono::seconds{10}, actors::offer_atom_v, m)
      .receive([&] { out.clear(); }, [&](caf::error& e) { out = caf::to_string(e); });
    return out;
  }
  double counted(const std::string& result) {
    return metrics
      ->counter("tessera_kvstore_remote_offer_blocks_total", "", {{"result", result}})
      .value();
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<kvstore::block_store> store;
  actors::kvstore_writer_actor writer;
  actors::kvstore_intake_actor intake;
  std::shared_ptr<cluster::metrics_registry> metrics = std::make_shared<cluster::metrics_registry>();
};

TEST_F(IntakeActorTest, AnOfferIsStoredAndServedAsOffered) {
  Offered o;
  ASSERT_EQ(o.offer.blocks.size(), 5u);
  start(o);
  EXPECT_EQ(send(o.offer), "");
  std::vector<engine::kv_block_hash> hashes = actors::hashes_of(o.offer);
  const auto back = actors::read_chain(*store, {o.eng->hash_seed(), hashes, uint64_t{1} << 30});
  ASSERT_EQ(back.blocks.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(back.blocks[i].hash, o.offer.blocks[i].hash);
    EXPECT_EQ(back.blocks[i].data, o.offer.blocks[i].data);
    EXPECT_EQ(back.blocks[i].checksum, o.offer.blocks[i].checksum);
  }
  EXPECT_EQ(counted("stored"), 5);
  EXPECT_EQ(send(o.offer), "") << "offered again: held, not stored twice";
  EXPECT_EQ(counted("held"), 5);
}

TEST_F(IntakeActorTest, ABadOfferStoresNothing) {
  Offered o;
  ASSERT_EQ(o.offer.blocks.size(), 5u);
  start(o);
  auto bad = o.offer;
  bad.blocks[4].data[0] ^= std::byte{0x80}; // the last block: a partial store would show
  EXPECT_NE(send(bad).find("checksum"), std::string::npos);
  for (const auto& b : o.offer.blocks)
    EXPECT_FALSE(store->contains({o.eng->hash_seed(), b.hash}));
  EXPECT_EQ(counted("refused"), 5);
}

TEST_F(IntakeActorTest, PastItsBoundAnOfferIsAnsweredBusyAndDropped) {
  Offered o;
  ASSERT_EQ(o.offer.blocks.size(), 5u);
  start(o, o.eng->get_backend().layout().block_bytes() * 4); // less than the offer
  EXPECT_NE(send(o.offer).find("busy"), std::string::npos);
  EXPECT_FALSE(store->contains({o.eng->hash_seed(), o.offer.blocks[0].hash}));
  EXPECT_EQ(counted("busy"), 5);
}

} // namespace
