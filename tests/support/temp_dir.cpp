#include "tests/support/temp_dir.hpp"

#include <random>
#include <string>
#include <system_error>

#include <unistd.h>

namespace tessera::test {

temp_dir::temp_dir(std::string_view prefix) {
  std::random_device rd;
  auto base = std::filesystem::temp_directory_path();
  for (;;) {
    auto p = base / (std::string{prefix} + "-" + std::to_string(::getpid()) + "-" +
                     std::to_string(rd()));
    std::error_code ec;
    if (std::filesystem::create_directory(p, ec)) {
      path_ = p;
      return;
    }
  }
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

} // namespace tessera::test
