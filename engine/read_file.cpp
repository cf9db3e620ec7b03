#include "engine/read_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/engine_errc.hpp"

namespace tessera::engine {

caf::expected<std::string> read_file_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return make_engine_error(engine_errc::io_error,
                             file.string() + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return make_engine_error(engine_errc::io_error, file.string() + ": read failed");
  return std::move(ss).str();
}

} // namespace tessera::engine
