// The ABBA order of `bench serve --sdk --rounds`, the aggregation of a
// level's rounds, and the one table printed of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "bench/serve_rounds.hpp"

namespace tessera::bench {
namespace {

constexpr auto H = serve_transport::http;
constexpr auto S = serve_transport::sdk;

TEST(ServeRounds, AbbaOrderAlternatesWhichTransportGoesFirst) {
  EXPECT_TRUE(abba_order(0).empty());
  EXPECT_TRUE(abba_order(-3).empty());
  EXPECT_EQ(abba_order(1), (std::vector{H, S}));
  EXPECT_EQ(abba_order(2), (std::vector{H, S, S, H}));
  EXPECT_EQ(abba_order(3), (std::vector{H, S, S, H, H, S}));
  // Each transport runs `rounds` times, and over an even count of rounds
  // each is first and second equally often.
  for (int n = 1; n <= 9; ++n) {
    auto o = abba_order(n);
    ASSERT_EQ(o.size(), static_cast<size_t>(2 * n));
    EXPECT_EQ(std::count(o.begin(), o.end(), H), n);
    int sdk_first = 0;
    for (size_t i = 0; i < o.size(); i += 2) {
      EXPECT_NE(o[i], o[i + 1]) << "a pair runs both transports";
      sdk_first += o[i] == S;
    }
    EXPECT_EQ(sdk_first, n / 2);
  }
}

TEST(ServeRounds, SpreadIsMedianMinMax) {
  auto s = spread_of({});
  EXPECT_EQ(s.median, 0);
  s = spread_of({5});
  EXPECT_EQ(s.median, 5);
  EXPECT_EQ(s.min, 5);
  EXPECT_EQ(s.max, 5);
  s = spread_of({30, 10, 20});
  EXPECT_EQ(s.median, 20);
  EXPECT_EQ(s.min, 10);
  EXPECT_EQ(s.max, 30);
  s = spread_of({4, 1, 3, 100});
  EXPECT_EQ(s.median, 3.5);
  EXPECT_EQ(s.max, 100);
}

level_summary round(double tok_s, double p50, double p90, size_t errors = 0) {
  level_summary l;
  l.output_tok_s = tok_s;
  l.ttft.p50_ms = p50;
  l.ttft.p90_ms = p90;
  l.errors = errors;
  return l;
}

TEST(ServeRounds, AggregatesEachFigureOnItsOwnAndRatioOfMedians) {
  // The median of each figure is taken on its own: the round with the
  // median tok/s need not be the one with the median TTFT.
  auto http = aggregate_rounds({round(1000, 50, 90), round(2000, 10, 400), round(1500, 30, 100, 1)});
  EXPECT_EQ(http.output_tok_s.median, 1500);
  EXPECT_EQ(http.output_tok_s.min, 1000);
  EXPECT_EQ(http.output_tok_s.max, 2000);
  EXPECT_EQ(http.ttft_p50_ms.median, 30);
  EXPECT_EQ(http.ttft_p90_ms.median, 100);
  EXPECT_EQ(http.ttft_p90_ms.max, 400);
  EXPECT_EQ(http.errors, 1u);
  auto sdk = aggregate_rounds({round(1800, 20, 60), round(100, 20, 60), round(1650, 20, 60)});
  EXPECT_DOUBLE_EQ(median_ratio(http, sdk), 1650.0 / 1500.0);
  EXPECT_EQ(median_ratio(aggregate_rounds({}), sdk), 0);
}

TEST(ServeRounds, OneTableForOneRoundOrMany) {
  auto with_itl = [](level_summary l, double itl) {
    l.itl.p50_ms = itl;
    return l;
  };
  // One round: plain figures, one row per level, ITL included.
  std::vector<sdk_table_row> one{{16, aggregate_rounds({with_itl(round(1500, 30, 90), 2.5)}),
                                  aggregate_rounds({with_itl(round(1650, 20, 60, 1), 2.25)})}};
  const auto t1 = sdk_table(one, 1);
  EXPECT_NE(t1.find("conc"), std::string::npos) << t1;
  EXPECT_NE(t1.find("HTTP ITL p50"), std::string::npos) << t1;
  EXPECT_NE(t1.find("   16       1500       1650     1.10       30.0       20.0       90.0       60.0        2.5"
                    "        2.2       1"),
            std::string::npos)
    << t1;
  EXPECT_EQ(t1.find("(1"), std::string::npos) << "no spread with one round:\n" << t1;
  EXPECT_NE(t1.find("one round per transport"), std::string::npos) << t1;
  // Rounds: median (min-max) of each figure; exactly one header.
  std::vector<sdk_table_row> many{
    {1, aggregate_rounds({round(100, 5, 9), round(120, 4, 8), round(110, 6, 10)}),
     aggregate_rounds({round(90, 3, 7), round(130, 2, 6), round(125, 3, 6)})},
    {64, aggregate_rounds({round(2000, 50, 90)}), aggregate_rounds({round(1000, 40, 80)})}};
  const auto t3 = sdk_table(many, 3);
  EXPECT_NE(t3.find("110 (100-120)"), std::string::npos) << t3;
  EXPECT_NE(t3.find("125 (90-130)"), std::string::npos) << t3;
  EXPECT_NE(t3.find("5.0 (4.0-6.0)"), std::string::npos) << t3;
  EXPECT_NE(t3.find("    0.50 "), std::string::npos) << t3;
  EXPECT_EQ(t3.find("conc", t3.find("conc") + 1), std::string::npos) << "two headers:\n" << t3;
  EXPECT_NE(t3.find("3 rounds per transport and level, ABBA order"), std::string::npos) << t3;
  EXPECT_EQ(std::count(t3.begin(), t3.end(), '\n'), 4); // header, two levels, the legend
}

} // namespace
} // namespace tessera::bench
