#include "common/logging.hpp"

#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace tessera {

void init_logging(std::string_view level) {
  auto logger = spdlog::stderr_color_mt("tessera");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  auto lvl = spdlog::level::from_str(std::string{level});
  if (lvl == spdlog::level::off && level != "off")
    lvl = spdlog::level::info;
  logger->set_level(lvl);
  spdlog::set_default_logger(std::move(logger));
}

} // namespace tessera
