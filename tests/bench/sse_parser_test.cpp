// The load generator's view of a streamed completion: SSE framing fed in
// arbitrary pieces, and what each event's data says.
#include "bench/sse_parser.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using tessera::bench::completion_event_kind;
using tessera::bench::parse_completion_event;
using tessera::bench::sse_parser;

// The events of `body` when it arrives `piece` bytes at a time.
std::vector<std::string> feed_in_pieces(const std::string& body, size_t piece) {
  sse_parser p;
  std::vector<std::string> out;
  for (size_t i = 0; i < body.size(); i += piece)
    for (auto& e : p.feed(std::string_view{body}.substr(i, piece)))
      out.push_back(std::move(e));
  return out;
}

TEST(SseParserTest, SplitsEventsWhateverTheReadBoundaries) {
  const std::string body = "data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata:[DONE]\r\r";
  const std::vector<std::string> want{"{\"a\":1}", "{\"b\":2}", "[DONE]"};
  for (size_t piece = 1; piece <= body.size(); ++piece)
    EXPECT_EQ(feed_in_pieces(body, piece), want) << "pieces of " << piece;
}

TEST(SseParserTest, HoldsAnIncompleteEventUntilItsBlankLine) {
  sse_parser p;
  EXPECT_TRUE(p.feed("data: {\"x\":").empty());
  EXPECT_TRUE(p.feed("1}\n").empty());
  EXPECT_GT(p.pending_bytes(), 0u);
  EXPECT_EQ(p.feed("\n"), std::vector<std::string>{"{\"x\":1}"});
  EXPECT_EQ(p.pending_bytes(), 0u);
}

TEST(SseParserTest, JoinsDataLinesAndSkipsCommentsAndOtherFields) {
  sse_parser p;
  auto events = p.feed(": keep-alive\n\nevent: message\nid: 7\ndata: one\ndata: two\n\n");
  EXPECT_EQ(events, std::vector<std::string>{"one\ntwo"});
}

TEST(SseParserTest, CrLfSplitAcrossPiecesEndsOneLineNotTwo) {
  sse_parser p;
  EXPECT_TRUE(p.feed("data: a\r").empty());
  // Were "\n" taken as a second line end, "a" would be reported here.
  EXPECT_TRUE(p.feed("\n").empty());
  EXPECT_EQ(p.feed("\r\n"), std::vector<std::string>{"a"});
}

TEST(CompletionEventTest, TextChunkCarriesItsText) {
  auto e = parse_completion_event(
    R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"hello","finish_reason":null}],"usage":null})");
  EXPECT_EQ(e.kind, completion_event_kind::text);
  EXPECT_EQ(e.text_bytes, 5u);
  EXPECT_TRUE(e.finish_reason.empty());
}

TEST(CompletionEventTest, ChatDeltaContentCountsAsText) {
  auto e = parse_completion_event(R"({"choices":[{"index":0,"delta":{"content":"hi"}}]})");
  EXPECT_EQ(e.kind, completion_event_kind::text);
  EXPECT_EQ(e.text_bytes, 2u);
}

TEST(CompletionEventTest, FinishOnlyChunkIsEmptyWithItsReason) {
  auto e = parse_completion_event(R"({"choices":[{"index":0,"text":"","finish_reason":"length"}]})");
  EXPECT_EQ(e.kind, completion_event_kind::empty);
  EXPECT_EQ(e.finish_reason, "length");
}

TEST(CompletionEventTest, UsageChunkGivesCompletionTokens) {
  auto e = parse_completion_event(
    R"({"choices":[],"usage":{"prompt_tokens":128,"completion_tokens":64,"total_tokens":192}})");
  EXPECT_EQ(e.kind, completion_event_kind::usage);
  EXPECT_EQ(e.completion_tokens, 64);
  EXPECT_EQ(e.prompt_tokens, 128);
  EXPECT_EQ(e.cached_tokens, -1) << "no prompt_tokens_details: unknown, not zero";
}

TEST(CompletionEventTest, UsageChunkGivesCachedPromptTokens) {
  auto e = parse_completion_event(
    R"({"choices":[],"usage":{"prompt_tokens":96,"completion_tokens":4,"total_tokens":100,)"
    R"("prompt_tokens_details":{"cached_tokens":64}}})");
  EXPECT_EQ(e.kind, completion_event_kind::usage);
  EXPECT_EQ(e.prompt_tokens, 96);
  EXPECT_EQ(e.cached_tokens, 64);
}

TEST(CompletionEventTest, ErrorEventGivesItsMessage) {
  auto e = parse_completion_event(R"({"error":{"message":"worker failed","type":"server_error"}})");
  EXPECT_EQ(e.kind, completion_event_kind::error);
  EXPECT_EQ(e.message, "worker failed");
}

TEST(CompletionEventTest, DoneAndGarbageAreTold) {
  EXPECT_EQ(parse_completion_event("[DONE]").kind, completion_event_kind::done);
  auto bad = parse_completion_event("{not json");
  EXPECT_EQ(bad.kind, completion_event_kind::malformed);
  EXPECT_NE(bad.message.find("not a JSON object"), std::string::npos);
  EXPECT_EQ(parse_completion_event(R"({"object":"x"})").kind, completion_event_kind::malformed);
}

} // namespace
