// The chaos harness's verdicts and measures: how a request is classified,
// time to detect and to recover per event, in-flight counts, totals, and
// the table, JSON and SVG it writes.

#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "chaos/chaos_report.hpp"
#include "chaos/timeline_svg.hpp"

namespace {

using namespace tessera::chaos;

observed_answer answered(double end_s, std::string text, std::string error = {}) {
  observed_answer a;
  a.ended = true;
  a.end_s = end_s;
  a.text = std::move(text);
  a.error = std::move(error);
  return a;
}

request_record record(size_t i, double send_s, double end_s, request_outcome o) {
  request_record r;
  r.index = i;
  r.send_s = send_s;
  r.end_s = end_s;
  r.outcome = o;
  return r;
}

health_sample health(double t, int code, std::string status, int workers) {
  return {t, code, std::move(status), workers};
}

TEST(ChaosReportTest, TheReferenceTextIsOkAnyOtherCompletedTextIsWrong) {
  EXPECT_EQ(classify(answered(1, "abc"), "abc", 10).outcome, request_outcome::ok);
  auto v = classify(answered(1, "abX d"), "abc d", 10);
  EXPECT_EQ(v.outcome, request_outcome::wrong);
  EXPECT_NE(v.detail.find("differs from byte 2 of 5"), std::string::npos) << v.detail;
  EXPECT_NE(v.detail.find("got \"X d\", want \"c d\""), std::string::npos) << v.detail;
  // A stream cut short that still said [DONE] is wrong, not ok.
  EXPECT_EQ(classify(answered(1, "ab"), "abc", 10).outcome, request_outcome::wrong);
}

TEST(ChaosReportTest, AnErrorTheClientSawIsFailedATimeoutOrNoAnswerIsLost) {
  EXPECT_EQ(classify(answered(1, "", "HTTP 503: no worker"), "abc", 10).outcome, request_outcome::failed);
  EXPECT_EQ(classify(answered(1, "ab", "the stream ended without [DONE]"), "abc", 10).outcome,
            request_outcome::failed);
  EXPECT_EQ(classify(answered(9, "", "read: The socket was timed out"), "abc", 10).outcome, request_outcome::lost);
  EXPECT_EQ(classify(observed_answer{}, "abc", 10).outcome, request_outcome::lost);
  // An answer after the end of the grace period came too late.
  EXPECT_EQ(classify(answered(11, "abc"), "abc", 10).outcome, request_outcome::lost);
}

TEST(ChaosReportTest, DetectionIsTheFirstHealthChangeAfterTheEvent) {
  const std::vector<health_sample> h{health(0, 200, "ready", 3), health(4.3, 200, "ready", 2),
                                     health(9.0, 503, "unavailable", 0), health(12, 200, "ready", 3)};
  auto d = time_to_detect(h, 4.0);
  ASSERT_TRUE(d);
  EXPECT_NEAR(*d, 0.3, 1e-9);
  // After the change at 4.3, the next change is at 9.0.
  d = time_to_detect(h, 5.0);
  ASSERT_TRUE(d);
  EXPECT_NEAR(*d, 4.0, 1e-9);
  EXPECT_FALSE(time_to_detect(h, 12.5));
  EXPECT_FALSE(time_to_detect({}, 1.0));
}

TEST(ChaosReportTest, RecoveryIsTheFirstCorrectAnswerToARequestSentAfterTheEvent) {
  const std::vector<request_record> rs{
    record(0, 1.0, 6.0, request_outcome::ok),     // sent before the event: does not count
    record(1, 5.5, 5.9, request_outcome::failed), // failed: does not count
    record(2, 5.2, 7.5, request_outcome::ok),
    record(3, 6.0, 7.0, request_outcome::ok),     // sent later, answered first
    record(4, 6.1, 6.5, request_outcome::wrong),  // wrong: does not count
  };
  auto r = time_to_recover(rs, 5.0);
  ASSERT_TRUE(r);
  EXPECT_NEAR(*r, 2.0, 1e-9);
  EXPECT_FALSE(time_to_recover(rs, 6.2));
}

TEST(ChaosReportTest, InFlightCountsRequestsSentBeforeAndNotEndedByTheEvent) {
  const std::vector<request_record> rs{record(0, 1, 2, request_outcome::ok), record(1, 1, 5, request_outcome::ok),
                                       record(2, 2, -1, request_outcome::lost), record(3, 4, 6, request_outcome::ok)};
  EXPECT_EQ(in_flight_at(rs, 3), 2u);
  EXPECT_EQ(in_flight_at(rs, 0.5), 0u);
}

chaos_report sample_report(request_outcome last) {
  chaos_report r;
  r.scenario = "kill-decode";
  r.description = "kill one";
  r.duration_s = 10;
  r.grace_s = 5;
  r.health_path = "/ready";
  r.requests = {record(0, 0.5, 3.5, request_outcome::ok), record(1, 2.5, 4.0, request_outcome::failed),
                record(2, 3.5, 4.5, request_outcome::ok), record(3, 4.0, -1, last)};
  r.requests[1].detail = "HTTP 503: no worker";
  event_record e;
  e.event.at_s = 3;
  e.event.action = event_action::kill;
  e.event.node = "decode-a";
  e.applied_s = 3.0;
  r.events.push_back(e);
  r.health = {health(0, 200, "ready", 3), health(3.2, 200, "ready", 2)};
  finish_report(r);
  return r;
}

TEST(ChaosReportTest, FinishFillsTotalsAndEachEventsTimes) {
  auto r = sample_report(request_outcome::lost);
  EXPECT_EQ(r.totals.sent, 4u);
  EXPECT_EQ(r.totals.completed, 2u);
  EXPECT_EQ(r.totals.ok, 2u);
  EXPECT_EQ(r.totals.failed, 1u);
  EXPECT_EQ(r.totals.wrong, 0u);
  EXPECT_EQ(r.totals.lost, 1u);
  ASSERT_EQ(r.events.size(), 1u);
  ASSERT_TRUE(r.events[0].detect_s);
  EXPECT_NEAR(*r.events[0].detect_s, 0.2, 1e-9);
  ASSERT_TRUE(r.events[0].recover_s);
  EXPECT_NEAR(*r.events[0].recover_s, 1.5, 1e-9);
  EXPECT_EQ(r.events[0].in_flight, 2u);
}

TEST(ChaosReportTest, ARunPassesOnlyWithoutWrongOrLostRequests) {
  EXPECT_FALSE(passed(sample_report(request_outcome::lost)));
  EXPECT_FALSE(passed(sample_report(request_outcome::wrong)));
  // Failed requests (a clear error) do not fail the run.
  EXPECT_TRUE(passed(sample_report(request_outcome::failed)));
}

TEST(ChaosReportTest, TheTableShowsTotalsEventsAndTheFailures) {
  const auto text = render_table(sample_report(request_outcome::lost));
  EXPECT_NE(text.find("kill-decode                 4         2      1      0      1"), std::string::npos) << text;
  EXPECT_NE(text.find("kill     decode-a           2     0.20 s     1.50 s"), std::string::npos) << text;
  EXPECT_NE(text.find("failed: HTTP 503: no worker"), std::string::npos) << text;
  EXPECT_NE(text.find("FAIL"), std::string::npos) << text;
}

TEST(ChaosReportTest, TheJsonHoldsTotalsEventsHealthAndEveryRequest) {
  auto j = nlohmann::json::parse(report_json(sample_report(request_outcome::ok)));
  EXPECT_EQ(j["scenario"], "kill-decode");
  EXPECT_EQ(j["passed"], true);
  EXPECT_EQ(j["totals"]["lost"], 0);
  EXPECT_EQ(j["totals"]["failed"], 1);
  ASSERT_EQ(j["events"].size(), 1u);
  EXPECT_EQ(j["events"][0]["action"], "kill");
  EXPECT_NEAR(j["events"][0]["recover_s"].get<double>(), 1.5, 1e-9);
  EXPECT_EQ(j["health"].size(), 2u);
  ASSERT_EQ(j["requests"].size(), 4u);
  EXPECT_EQ(j["requests"][1]["outcome"], "failed");
  EXPECT_EQ(j["requests"][1]["detail"], "HTTP 503: no worker");
}

TEST(ChaosReportTest, TheTimelineDrawsEveryRequestByOutcomeAndEachEvent) {
  const auto svg = render_timeline_svg(sample_report(request_outcome::wrong));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  for (const char* want : {"#0 ok", "#1 failed", "#3 wrong", ">kill decode-a</text>"})
    EXPECT_NE(svg.find(want), std::string::npos) << want;
}

TEST(ChaosReportTest, EventsAppliedTogetherShareOneLabel) {
  auto r = sample_report(request_outcome::ok);
  r.events.clear();
  for (const char* node : {"front", "decode-a"}) {
    event_record e;
    e.event.action = event_action::faults;
    e.event.node = node;
    e.event.plan = "drop,p=0.01";
    e.applied_s = 2.0;
    r.events.push_back(e);
    e.event.plan = "";
    e.applied_s = 4.0;
    r.events.push_back(e);
  }
  std::stable_sort(r.events.begin(), r.events.end(),
                   [](const auto& a, const auto& b) { return a.applied_s < b.applied_s; });
  const auto svg = render_timeline_svg(r);
  EXPECT_NE(svg.find(">faults front, decode-a</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">heal front, decode-a</text>"), std::string::npos) << svg;
}

} // namespace
