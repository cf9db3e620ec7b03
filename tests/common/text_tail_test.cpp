#include "common/text_tail.hpp"

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace {

using tessera::file_tail;
using tessera::tail_lines;

TEST(TextTailTest, KeepsTheLastLinesIndented) {
  EXPECT_EQ(tail_lines("a\nb\nc\n", 2), "  b\n  c\n");
  EXPECT_EQ(tail_lines("a\nb\nc", 2), "  b\n  c\n");
  EXPECT_EQ(tail_lines("a\nb\n", 5), "  a\n  b\n");
  EXPECT_EQ(tail_lines("", 3), "");
}

TEST(TextTailTest, AFileTailReadsOnlyTheEndOfALongLog) {
  tessera::test::temp_dir dir{"tessera-text-tail"};
  const auto log = dir.path() / "node.log";
  {
    std::ofstream out{log};
    for (int i = 0; i < 20000; ++i) // ~250 KB, past the 64 KiB window
      out << "line " << i << " of the node's log\n";
    out << "tessera node decode-b: cannot listen\n";
  }
  EXPECT_EQ(file_tail(log, 2), "  line 19999 of the node's log\n  tessera node decode-b: cannot listen\n");
  EXPECT_EQ(file_tail(dir.path() / "missing.log", 5), "");
}

} // namespace
