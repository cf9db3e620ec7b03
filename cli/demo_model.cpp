#include "cli/demo_model.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <unistd.h>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer_builder.hpp"
#include "engine/weights.hpp"

namespace tessera::cli {

namespace {

std::filesystem::path cache_root() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::filesystem::path{x} / "tessera";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path{h} / ".cache" / "tessera";
  return std::filesystem::temp_directory_path() / "tessera-cache";
}

} // namespace

caf::expected<std::filesystem::path> ensure_demo_model() {
  const auto dir = cache_root() / "demo-small-bf16";
  if (std::filesystem::exists(dir / "model.safetensors") &&
      std::filesystem::exists(dir / "tokenizer.json"))
    return dir;
  auto cfg = engine::model_shape("small");
  std::fprintf(stderr, "tessera: writing the demo model (random weights, %.1fM parameters) to %s ...\n",
               static_cast<double>(cfg->parameter_count()) / 1e6, dir.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  // Write next to the final folder, then rename: a crash never leaves a
  // half-written demo model that later runs would trust.
  const auto tmp = dir.string() + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::create_directories(tmp, ec);
  engine::random_model_options opts;
  opts.seed = 0;
  if (auto err = engine::write_random_model(tmp, *cfg, opts))
    return err;
  if (auto err = engine::write_demo_tokenizer(tmp, cfg->vocab_size))
    return err;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::rename(tmp, dir, ec);
  if (ec)
    return engine::make_engine_error(engine::engine_errc::io_error,
                                     "cannot move the demo model into " + dir.string() + ": " + ec.message());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "tessera: demo model ready in %.1f s\n", s);
  return dir;
}

} // namespace tessera::cli
