#include "common/child_process.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::child_process;

TEST(ChildProcessTest, ReadsLinesAndExitCode) {
  auto child = child_process::spawn("/bin/sh", {"-c", "echo one; echo two; exit 3"});
  ASSERT_TRUE(child) << tessera::error_text(child.error());
  auto a = child->read_line(5s);
  ASSERT_TRUE(a) << tessera::error_text(a.error());
  EXPECT_EQ(*a, "one");
  auto b = child->read_line(5s);
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, "two");
  EXPECT_FALSE(child->read_line(5s)); // stdout closed
  auto code = child->wait(5s);
  ASSERT_TRUE(code) << tessera::error_text(code.error());
  EXPECT_EQ(*code, 3);
  EXPECT_FALSE(child->running());
}

TEST(ChildProcessTest, PassesExtraEnvironment) {
  auto child = child_process::spawn("/bin/sh", {"-c", "echo \"$TESSERA_CHILD_TEST\""},
                                    {.env = {"TESSERA_CHILD_TEST=hello"}});
  ASSERT_TRUE(child);
  auto line = child->read_line(5s);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "hello");
}

TEST(ChildProcessTest, KilledChildReportsTheSignalAndReadTimesOut) {
  auto child = child_process::spawn("/bin/sh", {"-c", "exec sleep 30"});
  ASSERT_TRUE(child);
  auto line = child->read_line(50ms);
  ASSERT_FALSE(line);
  EXPECT_NE(tessera::error_text(line.error()).find("within 50 ms"), std::string::npos);
  EXPECT_FALSE(child->wait(10ms)); // still running
  child->kill(SIGKILL);
  auto code = child->wait(5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 128 + SIGKILL);
}

TEST(ChildProcessTest, MissingProgramIsAnErrorNamingIt) {
  auto child = child_process::spawn("/nonexistent/tessera-peer", {});
  ASSERT_FALSE(child);
  EXPECT_NE(tessera::error_text(child.error()).find("/nonexistent/tessera-peer"), std::string::npos);
}

} // namespace
