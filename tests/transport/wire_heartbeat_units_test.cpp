// Model units on the wire: the heartbeat's (outstanding and served work)
// and the worker join's (the units fitted for the worker's own device)
// cross it exactly, and a value that is negative, NaN or infinite is
// refused at the boundary with the field named.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "transport/wire/codec.hpp"

namespace tessera::transport::wire {
namespace {

heartbeat sample() {
  heartbeat m;
  m.node_id = "node-7/decode-0";
  m.sequence = 12;
  m.timestamp_us = 1'700'000'000'000'000ull;
  m.load = 0.5f;
  m.queue_depth = 3;
  m.kv_usage = {{kv_tier::g1_pool, 100, 1000}};
  return m;
}

TEST(WireHeartbeatUnitsTest, OutstandingAndServedUnitsRoundTrip) {
  auto m = sample();
  m.outstanding_units = 1234.5678;
  m.units_served = 9.87654321e9;
  auto frame = encode(m);
  ASSERT_TRUE(frame) << error_text(frame.error());
  auto back = decode(*frame);
  ASSERT_TRUE(back) << error_text(back.error());
  const auto& h = std::get<heartbeat>(*back);
  EXPECT_EQ(h.outstanding_units, 1234.5678);
  EXPECT_EQ(h.units_served, 9.87654321e9);
  EXPECT_EQ(h.queue_depth, m.queue_depth);
}

TEST(WireHeartbeatUnitsTest, AnOldHeartbeatWithoutUnitsDecodesAsZero) {
  auto m = sample(); // units left at their defaults
  auto back = decode(encode(m).value());
  ASSERT_TRUE(back);
  EXPECT_EQ(std::get<heartbeat>(*back).outstanding_units, 0.0);
  EXPECT_EQ(std::get<heartbeat>(*back).units_served, 0.0);
}

TEST(WireHeartbeatUnitsTest, NegativeNanAndInfiniteUnitsAreRefused) {
  const double bad[] = {-1.0, -1e-300, std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (double v : bad) {
    auto outstanding = sample();
    outstanding.outstanding_units = v;
    auto f = encode(outstanding);
    ASSERT_FALSE(f) << v;
    EXPECT_NE(error_text(f.error()).find("outstanding_units must be finite and >= 0"), std::string::npos)
      << error_text(f.error());
    auto served = sample();
    served.units_served = v;
    auto g = encode(served);
    ASSERT_FALSE(g) << v;
    EXPECT_NE(error_text(g.error()).find("units_served must be finite and >= 0"), std::string::npos)
      << error_text(g.error());
  }
}

worker_join join_sample() {
  worker_join m;
  m.worker_id = 7;
  m.at = {"node-2", "decode-1"};
  m.roles = {node_role::decode};
  m.model_fingerprint = 0xfeed;
  m.block_tokens = 16;
  m.num_blocks = 1024;
  m.hash_seed = 0x5eed;
  return m;
}

TEST(WireHeartbeatUnitsTest, AJoinCarriesTheWorkersOwnUnitsExactly) {
  auto m = join_sample();
  m.units_a = 0.0797408;
  m.units_b = 1.26638;
  m.units_c = 3.5;
  m.units_d = 1.0645e-4;
  auto back = decode(encode(m).value());
  ASSERT_TRUE(back) << error_text(back.error());
  const auto& j = std::get<worker_join>(*back);
  EXPECT_EQ(j.units_a, 0.0797408);
  EXPECT_EQ(j.units_b, 1.26638);
  EXPECT_EQ(j.units_c, 3.5);
  EXPECT_EQ(j.units_d, 1.0645e-4);
}

TEST(WireHeartbeatUnitsTest, AJoinWithoutUnitsDecodesAsAllZero) {
  auto back = decode(encode(join_sample()).value());
  ASSERT_TRUE(back);
  const auto& j = std::get<worker_join>(*back);
  EXPECT_EQ(j.units_a + j.units_b + j.units_c + j.units_d, 0.0);
}

TEST(WireHeartbeatUnitsTest, AJoinsNegativeNanOrInfiniteUnitsAreRefusedByName) {
  const double bad[] = {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()};
  for (double v : bad)
    for (const char* field : {"units_a", "units_b", "units_c", "units_d"}) {
      auto m = join_sample();
      const std::string f = field;
      (f == "units_a" ? m.units_a : f == "units_b" ? m.units_b : f == "units_c" ? m.units_c : m.units_d) = v;
      auto frame = encode(m);
      ASSERT_FALSE(frame) << field << " " << v;
      EXPECT_NE(error_text(frame.error()).find(f + " must be finite and >= 0"), std::string::npos)
        << error_text(frame.error());
    }
}

} // namespace
} // namespace tessera::transport::wire
