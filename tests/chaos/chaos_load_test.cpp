// The chaos load: a seeded schedule of known requests, and the client's
// reading of a streamed answer.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chaos/load_plan.hpp"
#include "chaos/stream_answer.hpp"

namespace {

using namespace tessera::chaos;

scenario load_scenario_of(double rate, double duration_s, double seeded) {
  scenario s;
  s.duration_s = duration_s;
  s.load.rate = rate;
  s.load.prompt_tokens_min = 5;
  s.load.prompt_tokens_max = 9;
  s.load.max_tokens = 7;
  s.load.seeded_fraction = seeded;
  s.load.temperature = 0.8;
  return s;
}

TEST(ChaosLoadTest, TheSameSeedGivesTheSameRequests) {
  const auto s = load_scenario_of(10, 30, 0.5);
  const auto a = plan_load(s, 512);
  const auto b = plan_load(s, 512);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].send_s, b[i].send_s);
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].seed, b[i].seed);
  }
  auto other = s;
  other.seed = 2;
  EXPECT_NE(plan_load(other, 512)[0].prompt, a[0].prompt);
}

TEST(ChaosLoadTest, RequestsFollowTheRateAndTheLoadsShapes) {
  const auto reqs = plan_load(load_scenario_of(10, 30, 0.5), 100);
  // Poisson arrivals: about rate * duration requests.
  EXPECT_GT(reqs.size(), 240u);
  EXPECT_LT(reqs.size(), 360u);
  size_t seeded = 0;
  double last = 0;
  for (const auto& r : reqs) {
    EXPECT_GE(r.send_s, last);
    EXPECT_LT(r.send_s, 30);
    last = r.send_s;
    EXPECT_GE(r.prompt.size(), 5u);
    EXPECT_LE(r.prompt.size(), 9u);
    for (auto id : r.prompt) {
      EXPECT_GE(id, 8);
      EXPECT_LT(id, 100);
    }
    EXPECT_EQ(r.max_tokens, 7);
    EXPECT_EQ(r.seed.has_value(), r.temperature > 0);
    seeded += r.seed ? 1 : 0;
  }
  EXPECT_GT(seeded, reqs.size() / 4);
  EXPECT_LT(seeded, reqs.size() * 3 / 4);
  for (const auto& r : plan_load(load_scenario_of(10, 5, 0), 100))
    EXPECT_EQ(r.temperature, 0);
}

TEST(ChaosLoadTest, TheBodyAsksForAStreamedCompletionOfTheTokenIds) {
  planned_request r;
  r.prompt = {9, 10, 11};
  r.max_tokens = 5;
  r.temperature = 0.5f;
  r.seed = 77;
  auto j = nlohmann::json::parse(completion_body(r, "nano"));
  EXPECT_EQ(j["model"], "nano");
  EXPECT_EQ(j["prompt"], nlohmann::json({9, 10, 11}));
  EXPECT_EQ(j["max_tokens"], 5);
  EXPECT_EQ(j["seed"], 77);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["ignore_eos"], true);
  r.seed.reset();
  EXPECT_FALSE(nlohmann::json::parse(completion_body(r, "nano")).contains("seed"));
}

TEST(ChaosLoadTest, AStreamedAnswerIsItsChunksTextsJoined) {
  stream_answer a;
  a.on_status(200);
  const std::string body = "data: {\"choices\":[{\"text\":\"Hel\",\"finish_reason\":null}]}\n\n"
                           "data: {\"choices\":[{\"text\":\"lo \\u00e9\",\"finish_reason\":\"length\"}]}\n\n"
                           "data: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
  // In pieces that split lines and events.
  for (size_t i = 0; i < body.size(); i += 7)
    a.on_body(std::string_view{body}.substr(i, 7));
  EXPECT_EQ(a.text(), "Hello \xc3\xa9");
  EXPECT_EQ(a.finish_reason(), "length");
  EXPECT_TRUE(a.done());
  EXPECT_EQ(a.error(""), "");
}

TEST(ChaosLoadTest, AStreamWithoutDoneAnErrorEventOrABadStatusIsAnError) {
  stream_answer cut;
  cut.on_status(200);
  cut.on_body("data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
  EXPECT_EQ(cut.error(""), "the stream ended without [DONE]");
  EXPECT_EQ(cut.error("read: end of stream"), "read: end of stream");

  stream_answer event;
  event.on_status(200);
  event.on_body("data: {\"error\":{\"message\":\"worker lost\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(event.error(""), "error event: worker lost");

  stream_answer status;
  status.on_status(503);
  status.on_body("{\"error\":{\"message\":\"no worker\"}}");
  EXPECT_EQ(status.error(""), "HTTP 503: {\"error\":{\"message\":\"no worker\"}}");

  stream_answer refused;
  EXPECT_EQ(refused.error("connect: Connection refused"), "connect: Connection refused");
}

} // namespace
