// Parsing Mooncake-format traces: every bad line is refused with its file,
// line and field named; out-of-order arrivals are sorted and counted.
#include "bench/mooncake_trace.hpp"

#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace {

using tessera::bench::mooncake_trace;
using tessera::bench::parse_mooncake_trace;
using tessera::bench::select_requests;
using tessera::bench::trace_parse_options;
using tessera::bench::trace_selection;

caf::expected<mooncake_trace> parse(const std::string& text, trace_parse_options opts = {}) {
  std::istringstream in{text};
  return parse_mooncake_trace(in, "t.jsonl", opts);
}

// The error text of parsing `text`, "" if it parsed.
std::string error_of(const std::string& text, trace_parse_options opts = {}) {
  auto t = parse(text, opts);
  return t ? "" : tessera::error_message(t.error());
}

const std::string good_line = R"({"timestamp": 5, "input_length": 600, "output_length": 7, "hash_ids": [0, 1]})";

TEST(MooncakeTraceTest, ReadsEveryFieldOfEachLine) {
  auto t = parse(good_line + "\n" +
                 R"({"timestamp": 9, "input_length": 512, "output_length": 1, "hash_ids": [0], "extra": "ignored"})");
  ASSERT_TRUE(t) << tessera::error_text(t.error());
  ASSERT_EQ(t->requests.size(), 2u);
  const auto& r = t->requests[0];
  EXPECT_EQ(r.timestamp_ms, 5);
  EXPECT_EQ(r.input_length, 600);
  EXPECT_EQ(r.output_length, 7);
  EXPECT_EQ(r.hash_ids, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(r.line, 1);
  EXPECT_EQ(t->requests[1].line, 2);
  EXPECT_EQ(t->out_of_order_lines, 0u);
}

TEST(MooncakeTraceTest, SkipsBlankLinesButCountsThemInLineNumbers) {
  auto t = parse("\n" + good_line + "\n\n  \n" + good_line + "\n");
  ASSERT_TRUE(t);
  ASSERT_EQ(t->requests.size(), 2u);
  EXPECT_EQ(t->requests[0].line, 2);
  EXPECT_EQ(t->requests[1].line, 5);
}

TEST(MooncakeTraceTest, SortsOutOfOrderArrivalsStablyAndSaysHowMany) {
  auto t = parse(R"({"timestamp": 30, "input_length": 1, "output_length": 1, "hash_ids": [1]}
{"timestamp": 10, "input_length": 1, "output_length": 1, "hash_ids": [2]}
{"timestamp": 10, "input_length": 1, "output_length": 1, "hash_ids": [3]}
{"timestamp": 20, "input_length": 1, "output_length": 1, "hash_ids": [4]})");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->out_of_order_lines, 1u);
  std::vector<int64_t> order;
  for (const auto& r : t->requests)
    order.push_back(r.hash_ids[0]);
  EXPECT_EQ(order, (std::vector<int64_t>{2, 3, 4, 1}));
}

TEST(MooncakeTraceTest, ErrorsNameFileLineAndField) {
  const std::string l1 = good_line + "\n";
  struct bad_case {
    std::string text;
    std::string want;
  };
  const bad_case cases[] = {
    {l1 + "{not json\n", "t.jsonl:2: line: not a JSON object"},
    {l1 + "[1, 2]\n", "t.jsonl:2: line: not a JSON object"},
    {R"({"input_length": 1, "output_length": 1, "hash_ids": [1]})", "t.jsonl:1: timestamp: missing"},
    {R"({"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]})",
     "t.jsonl:1: timestamp: must be in 0.."},
    {R"({"timestamp": "5", "input_length": 1, "output_length": 1, "hash_ids": [1]})",
     "t.jsonl:1: timestamp: must be an integer"},
    {R"({"timestamp": 1.5, "input_length": 1, "output_length": 1, "hash_ids": [1]})",
     "t.jsonl:1: timestamp: must be an integer"},
    {l1 + l1 + R"({"timestamp": 5, "input_length": 0, "output_length": 1, "hash_ids": []})",
     "t.jsonl:3: input_length: must be in 1.."},
    {R"({"timestamp": 5, "input_length": 1, "output_length": 1})", "t.jsonl:1: hash_ids: missing"},
    {R"({"timestamp": 5, "input_length": 1, "output_length": 0, "hash_ids": [1]})",
     "t.jsonl:1: output_length: must be in 1.."},
    {R"({"timestamp": 5, "input_length": 2000, "output_length": 1, "hash_ids": [1, 2, 3]})",
     "t.jsonl:1: hash_ids: 3 ids for input_length 2000, expected ceil(2000 / 512) = 4"},
    {R"({"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]})",
     "t.jsonl:1: hash_ids: 2 ids for input_length 512, expected ceil(512 / 512) = 1"},
    {R"({"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1, "x"]})",
     "t.jsonl:1: hash_ids[1]: must be an integer"},
    {R"({"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1, -2]})",
     "t.jsonl:1: hash_ids[1]: must be in 0.."},
    {R"({"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": 7})",
     "t.jsonl:1: hash_ids: must be an array"},
    {R"({"timestamp": 5, "input_length": 99999999, "output_length": 1, "hash_ids": [1]})",
     "t.jsonl:1: input_length: must be in 1..1048576, got 99999999"},
    {R"({"timestamp": 18446744073709551615, "input_length": 1, "output_length": 1, "hash_ids": [1]})",
     "t.jsonl:1: timestamp: must be at most"},
    {"", "t.jsonl: no requests in the trace"},
    {"\n\n", "t.jsonl: no requests in the trace"},
  };
  for (const auto& c : cases) {
    const auto err = error_of(c.text);
    EXPECT_NE(err.find(c.want), std::string::npos) << "input: " << c.text << "\nerror: " << err;
  }
}

TEST(MooncakeTraceTest, RefusesWhatExceedsItsBounds) {
  trace_parse_options small;
  small.max_line_bytes = 40;
  EXPECT_NE(error_of(good_line, small).find("t.jsonl:1: line longer than 40 bytes"), std::string::npos);
  trace_parse_options two;
  two.max_requests = 2;
  EXPECT_NE(error_of(good_line + "\n" + good_line + "\n" + good_line, two).find("t.jsonl:3: line: more than 2"),
            std::string::npos);
}

TEST(MooncakeTraceTest, BlockSizeDecidesHowManyIdsAreExpected) {
  trace_parse_options bt32;
  bt32.block_tokens = 32;
  EXPECT_EQ(error_of(R"({"timestamp": 0, "input_length": 50, "output_length": 4, "hash_ids": [6, 7]})", bt32), "");
  EXPECT_NE(error_of(good_line, bt32).find("expected ceil(600 / 32) = 19"), std::string::npos);
}

TEST(MooncakeTraceTest, MissingFileIsNamed) {
  auto t = tessera::bench::load_mooncake_trace("/nonexistent/trace.jsonl");
  ASSERT_FALSE(t);
  EXPECT_NE(tessera::error_message(t.error()).find("cannot open /nonexistent/trace.jsonl"), std::string::npos);
}

TEST(MooncakeTraceTest, SelectionKeepsEarlyShortRequests) {
  auto t = parse(R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}
{"timestamp": 59999, "input_length": 1000, "output_length": 1, "hash_ids": [2, 3]}
{"timestamp": 60000, "input_length": 10, "output_length": 1, "hash_ids": [4]}
{"timestamp": 90000, "input_length": 10, "output_length": 1, "hash_ids": [5]})");
  ASSERT_TRUE(t);
  trace_selection one_minute;
  one_minute.minutes = 1;
  EXPECT_EQ(select_requests(*t, one_minute).size(), 2u) << "timestamp < 60000 ms";
  trace_selection short_only;
  short_only.max_input_tokens = 512;
  size_t skipped = 0;
  auto s = select_requests(*t, short_only, &skipped);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(skipped, 1u);
  trace_selection first_two;
  first_two.max_requests = 2;
  EXPECT_EQ(select_requests(*t, first_two).size(), 2u);
  EXPECT_EQ(select_requests(*t, {}).size(), 4u);
}

} // namespace
