#include "tests/support/run_tessera.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>

namespace tessera::test {

std::string tessera_binary() {
  const char* dir = std::getenv("TESSERA_BINARY_DIR");
  return std::string{dir ? dir : "."} + "/cli/tessera";
}

run_result run_tessera(const std::string& args) {
  run_result r;
  const std::string cmd = tessera_binary() + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr)
    return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

} // namespace tessera::test
