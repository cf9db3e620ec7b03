// The heartbeat's model units (outstanding and served work): they cross
// the wire exactly, and a value that is negative, NaN or infinite is
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

} // namespace
} // namespace tessera::transport::wire
