// free_port() (tests/support/sockets.hpp): a port another test process
// holds is never given, and a port given is held against the others.
#include "tests/support/sockets.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace {

bool bindable(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto a = tessera::test::loopback_address(port);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

/// Locks (or unlocks) bytes [from, to) of `fd`'s file as another process would.
int lock_range(int fd, short type, off_t from, off_t to) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = from;
  l.l_len = to - from;
  return ::fcntl(fd, F_OFD_SETLK, &l) == 0 ? 0 : errno;
}

TEST(FreePortTest, APortAnotherProcessHoldsIsNeverGivenAndAGivenPortIsHeld) {
  // A lock file of this test's own, so that the whole port range can be
  // held without starving the tests running beside it. free_port() opens
  // its file on its first call, after this.
  tessera::test::temp_dir dir{"tessera-free-port"};
  ASSERT_EQ(::setenv("TMPDIR", dir.path().c_str(), 1), 0);
  const auto file = dir.path() / "tessera-test-ports.lock";
  const int other = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666); // its own open file description
  ASSERT_GE(other, 0);

  // The one port the other holder leaves: bindable, where free_port looks
  // (below the kernel's ephemeral range, or above it when there is no room).
  int low = 32768, high = 60999;
  std::ifstream{"/proc/sys/net/ipv4/ip_local_port_range"} >> low >> high;
  const int first = low > 12000 ? 10000 : high + 1;
  const int last = low > 12000 ? low - 1 : 65535;
  int left = 0;
  for (int p = (first + last) / 2; p <= last && left == 0; ++p)
    if (bindable(static_cast<uint16_t>(p)))
      left = p;
  ASSERT_NE(left, 0);
  ASSERT_EQ(lock_range(other, F_WRLCK, 1, left), 0);
  ASSERT_EQ(lock_range(other, F_WRLCK, left + 1, 65536), 0);

  EXPECT_EQ(tessera::test::free_port(), left) << "every other port is held by another process";

  ASSERT_EQ(lock_range(other, F_UNLCK, 1, 65536), 0);
  EXPECT_EQ(lock_range(other, F_WRLCK, left, left + 1), EAGAIN) << "the port given is held against the others";
  const auto next = tessera::test::free_port();
  EXPECT_NE(next, left) << "and not given twice";
  EXPECT_NE(next, 0);
  ::close(other);
}

} // namespace
