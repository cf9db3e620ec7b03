#include "sdk/secret_file.hpp"

#include <fstream>
#include <sstream>

#include <tessera/sdk.hpp>

namespace tessera::sdk::detail {

namespace {
constexpr size_t min_secret_bytes = 16;
constexpr size_t max_secret_bytes = 4096;

[[noreturn]] void refuse(const std::filesystem::path& file, const std::string& why) {
  throw error(client_errc::bad_request, 400, "cluster secret file " + file.string() + ": " + why);
}
} // namespace

std::string read_secret_file(const std::filesystem::path& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(file, ec);
  if (ec || !fs::exists(st))
    refuse(file, "cannot read it (" + (ec ? ec.message() : std::string{"no such file"}) + ")");
  if (!fs::is_regular_file(st))
    refuse(file, "not a regular file");
  using p = fs::perms;
  if ((st.permissions() & (p::group_all | p::others_all)) != p::none)
    refuse(file, "readable or writable by group or others (chmod 600 it)");
  std::ifstream in(file, std::ios::binary);
  if (!in)
    refuse(file, "cannot open it");
  std::ostringstream ss;
  ss << in.rdbuf();
  auto s = ss.str();
  if (s.size() > max_secret_bytes + 64)
    refuse(file, "longer than " + std::to_string(max_secret_bytes) + " bytes");
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  if (s.size() < min_secret_bytes)
    refuse(file, "shorter than " + std::to_string(min_secret_bytes) + " bytes");
  if (s.size() > max_secret_bytes)
    refuse(file, "longer than " + std::to_string(max_secret_bytes) + " bytes");
  return s;
}

} // namespace tessera::sdk::detail
