#include "cluster/cluster_secret.hpp"

#include <fstream>
#include <iterator>

#include <caf/sec.hpp>

#include <sys/stat.h>

namespace tessera::cluster {

namespace {

caf::error bad(const std::filesystem::path& file, const std::string& why) {
  return caf::make_error(caf::sec::invalid_argument,
                         "cluster secret " + file.string() + ": " + why);
}

} // namespace

caf::expected<std::string> load_cluster_secret(const std::filesystem::path& file) {
  struct stat sb {};
  if (::stat(file.c_str(), &sb) != 0)
    return bad(file, "cannot be read (does it exist? make one with: umask 077; "
                     "head -c 32 /dev/urandom | base64 > " + file.string() + ")");
  if (!S_ISREG(sb.st_mode))
    return bad(file, "is not a regular file");
  if ((sb.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(sb.st_mode & 07777));
    return bad(file, std::string{"has mode "} + mode
                       + ": group and others may read or write it; run chmod 600 "
                       + file.string());
  }
  if (static_cast<uint64_t>(sb.st_size) > max_cluster_secret_bytes)
    return bad(file, "is " + std::to_string(sb.st_size) + " bytes (at most "
                       + std::to_string(max_cluster_secret_bytes) + ")");
  std::ifstream in{file, std::ios::binary};
  if (!in)
    return bad(file, "cannot be opened");
  std::string s{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  if (s.size() < min_cluster_secret_bytes)
    return bad(file, "holds " + std::to_string(s.size()) + " bytes; a secret needs at least "
                       + std::to_string(min_cluster_secret_bytes)
                       + " (make one with: head -c 32 /dev/urandom | base64)");
  return s;
}

} // namespace tessera::cluster
