#include "cluster/kv_hash_key.hpp"
#include "common/hex.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <caf/sec.hpp>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::cluster {

namespace {

caf::error bad(const std::filesystem::path& file, const std::string& why) {
  return caf::make_error(caf::sec::invalid_argument, "kv block hash key " + file.string() + ": " + why);
}

std::string errno_text() { return std::strerror(errno); }

constexpr size_t hex_digits = 32;

std::string to_hex(const kv_hash_key_bytes& k) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (auto b : k) {
    s += digits[std::to_integer<unsigned>(b) >> 4];
    s += digits[std::to_integer<unsigned>(b) & 0xf];
  }
  return s;
}

caf::expected<kv_hash_key_bytes> read_key(const std::filesystem::path& file, int fd) {
  struct stat sb {};
  if (::fstat(fd, &sb) != 0)
    return bad(file, "cannot be read: " + errno_text());
  if (!S_ISREG(sb.st_mode))
    return bad(file, "is not a regular file");
  if ((sb.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(sb.st_mode & 07777));
    return bad(file, std::string{"has mode "} + mode + ": group and others may read or write it; run chmod 600 " +
                       file.string());
  }
  char buf[hex_digits + 2];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0)
    return bad(file, "cannot be read: " + errno_text());
  std::string_view text{buf, static_cast<size_t>(n)};
  if (text.size() == hex_digits + 1 && text.back() == '\n')
    text.remove_suffix(1);
  if (text.size() != hex_digits)
    return bad(file, "must hold 32 hex digits and a newline (" + std::to_string(n) +
                       (n == static_cast<ssize_t>(sizeof buf) ? " or more" : "") +
                       " bytes found); delete it to make a new key (the disk tier's blocks become unreachable)");
  kv_hash_key_bytes k{};
  for (size_t i = 0; i < k.size(); ++i) {
    int hi = hex_digit_value(text[2 * i]), lo = hex_digit_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return bad(file, "holds a character that is not a hex digit at byte " +
                         std::to_string(hi < 0 ? 2 * i : 2 * i + 1) +
                         "; delete it to make a new key (the disk tier's blocks become unreachable)");
    k[i] = static_cast<std::byte>(hi << 4 | lo);
  }
  return k;
}

caf::expected<kv_hash_key_bytes> read_key(const std::filesystem::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return bad(file, errno == ELOOP ? "is a symbolic link" : "cannot be opened: " + errno_text());
  auto k = read_key(file, fd);
  ::close(fd);
  return k;
}

} // namespace

kv_hash_key_bytes kv_hash_key_from_secret(std::string_view secret) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  static const char empty = 0; // a zero-length key is valid HMAC; OpenSSL wants a pointer
  HMAC(EVP_sha256(), secret.empty() ? &empty : secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(kv_hash_key_label.data()), kv_hash_key_label.size(), mac, &len);
  kv_hash_key_bytes k{};
  std::memcpy(k.data(), mac, k.size());
  return k;
}

caf::expected<kv_hash_key_bytes> load_or_create_kv_hash_key(const std::filesystem::path& dir) {
  const auto file = dir / kv_hash_key_file_name;
  if (::access(file.c_str(), F_OK) == 0 || errno != ENOENT)
    return read_key(file);
  kv_hash_key_bytes k{};
  if (RAND_bytes(reinterpret_cast<unsigned char*>(k.data()), static_cast<int>(k.size())) != 1)
    return bad(file, "no random bytes for a new key (OpenSSL RAND_bytes failed)");
  const std::string text = to_hex(k) + "\n";
  kv_hash_key_bytes tag{};
  if (RAND_bytes(reinterpret_cast<unsigned char*>(tag.data()), static_cast<int>(tag.size())) != 1)
    return bad(file, "no random bytes for a temporary name (OpenSSL RAND_bytes failed)");
  // A name of its own per attempt: several starts may race here.
  const auto tmp = dir / (std::string{kv_hash_key_file_name} + ".tmp-" + to_hex(tag));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return bad(file, "cannot be created: " + tmp.string() + ": " + errno_text());
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const std::string write_error = written ? "" : errno_text();
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    return bad(file, "cannot be written: " + write_error);
  }
  // link() never replaces: a key another process made first wins, and
  // both then read that one.
  const int linked = ::link(tmp.c_str(), file.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && link_errno != EEXIST)
    return bad(file, std::string{"cannot be created: "} + std::strerror(link_errno));
  if (int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return read_key(file);
}

} // namespace tessera::cluster
