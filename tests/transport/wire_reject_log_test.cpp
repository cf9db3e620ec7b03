// A flood of rejected frames is counted exactly but logged in a few lines,
// each later one saying how many it left out.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "common/log_limiter.hpp"
#include "transport/wire/codec.hpp"
#include "wire_samples.hpp"

namespace tessera::transport::wire {
namespace {

using namespace std::chrono_literals;
using bytes = std::vector<std::byte>;

// Sends spdlog's default logger into a string for the test's life.
class captured_log {
public:
  captured_log() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    auto logger = std::make_shared<spdlog::logger>("captured", sink);
    logger->set_pattern("%l %v");
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~captured_log() { spdlog::set_default_logger(previous_); }
  captured_log(const captured_log&) = delete;
  captured_log& operator=(const captured_log&) = delete;

  [[nodiscard]] std::vector<std::string> lines() const {
    std::vector<std::string> v;
    std::istringstream in{out_.str()};
    for (std::string line; std::getline(in, line);)
      v.push_back(line);
    return v;
  }

private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

// A well-formed frame with one body byte flipped: its checksum fails.
bytes corrupt_frame() {
  auto f = encode(test::full_handoff());
  EXPECT_TRUE(f);
  bytes frame = f ? std::move(*f) : bytes(64);
  frame.back() ^= std::byte{0x01};
  return frame;
}

TEST(WireRejectLogTest, TenThousandRejectedFramesLogAFewLinesAndCountEveryOne) {
  // One frame every 5 ms: the flood lasts 50 s.
  auto now = std::chrono::steady_clock::time_point{} + 1h;
  auto limiter = std::make_shared<log_limiter>(10, 10s, [&now] {
    now += 5ms;
    return now;
  });
  frame_decoder d{{}, limiter};
  const bytes frame = corrupt_frame();
  captured_log log;
  for (int i = 0; i < 10'000; ++i)
    EXPECT_FALSE(d.decode(frame, "node-b"));

  EXPECT_EQ(d.counters().frames_rejected, 10'000u);
  EXPECT_EQ(d.counters().rejected(transport_errc::checksum_mismatch), 10'000u);
  EXPECT_EQ(d.counters().frames_decoded, 0u);

  const auto lines = log.lines();
  // The first 10, then one per 10 s of the 50.
  ASSERT_GE(lines.size(), 11u);
  EXPECT_LE(lines.size(), 15u);
  for (const auto& line : lines)
    EXPECT_EQ(line.rfind("warning transport: rejected frame from node-b: ", 0), 0u) << line;
  EXPECT_EQ(lines[0].find("not logged"), std::string::npos) << lines[0];
  // The first line after the burst (frames 0-9, by 50 ms) comes 10 s later,
  // at frame 2009, and accounts for frames 10-2008.
  EXPECT_NE(lines[10].find("(1999 more rejected frames not logged since the last such line)"),
            std::string::npos)
    << lines[10];
  uint64_t reported = 0;
  const std::regex more{R"(\((\d+) more rejected frames not logged)"};
  for (const auto& line : lines) {
    std::smatch m;
    if (std::regex_search(line, m, more))
      reported += std::stoull(m[1]);
  }
  EXPECT_EQ(lines.size() + limiter->suppressed_total(), 10'000u);
  EXPECT_LE(reported, limiter->suppressed_total());
  EXPECT_GE(reported + 2000, limiter->suppressed_total()) << "at most the last 10 s unreported";
}

TEST(WireRejectLogTest, DecodersShareTheProcessLimiterByDefault) {
  // A peer that reconnects gets a fresh decoder each time: the limiter must
  // not start over with it.
  const bytes frame = corrupt_frame();
  captured_log log;
  uint64_t rejected = 0;
  for (int connection = 0; connection < 1000; ++connection) {
    frame_decoder d;
    for (int i = 0; i < 10; ++i)
      EXPECT_FALSE(d.decode(frame));
    rejected += d.counters().frames_rejected;
  }
  EXPECT_EQ(rejected, 10'000u);
  const auto lines = log.lines();
  EXPECT_GE(lines.size(), 1u);
  // 10 lines, and one more only if the test took 10 s.
  EXPECT_LE(lines.size(), 11u);
}

TEST(WireRejectLogTest, RejectionsFoundOutsideDecodeAreLimitedToo) {
  auto now = std::chrono::steady_clock::time_point{} + 1h;
  auto limiter = std::make_shared<log_limiter>(3, 10s, [&now] { return now; });
  frame_decoder d{{}, limiter};
  captured_log log;
  for (int i = 0; i < 100; ++i)
    d.reject(make_transport_error(transport_errc::bad_frame, "bad frame magic"), "node-c");
  EXPECT_EQ(d.counters().rejected(transport_errc::bad_frame), 100u);
  EXPECT_EQ(log.lines().size(), 3u);
}

} // namespace
} // namespace tessera::transport::wire
