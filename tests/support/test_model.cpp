#include "tests/support/test_model.hpp"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/tokenizer_builder.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::test {

namespace {

using key = std::tuple<std::string, engine::dtype, uint64_t>;

std::mutex mu;

temp_dir& root() {
  static temp_dir dir{"tessera-models"};
  return dir;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "test model: %s\n", what.c_str());
  std::abort();
}

} // namespace

const std::filesystem::path& test_model_dir(std::string_view shape, engine::dtype weights,
                                            uint64_t seed) {
  static std::map<key, std::filesystem::path> dirs;
  std::lock_guard lock{mu};
  key k{std::string{shape}, weights, seed};
  if (auto it = dirs.find(k); it != dirs.end())
    return it->second;
  auto cfg = engine::model_shape(shape);
  if (!cfg)
    die("unknown shape " + std::string{shape});
  auto dir = root().path() /
             (std::string{shape} + "-" + std::string{engine::to_safetensors_name(weights)} + "-" +
              std::to_string(seed));
  engine::random_model_options opts;
  opts.seed = seed;
  opts.weight_dtype = weights;
  if (auto err = engine::write_random_model(dir, *cfg, opts))
    die(error_text(err));
  if (auto err = engine::write_demo_tokenizer(dir, cfg->vocab_size))
    die(error_text(err));
  return dirs.emplace(k, dir).first->second;
}

std::shared_ptr<const engine::model_weights> test_model_weights(std::string_view shape,
                                                                engine::dtype weights,
                                                                uint64_t seed) {
  static std::map<key, std::shared_ptr<const engine::model_weights>> cache;
  const auto& dir = test_model_dir(shape, weights, seed);
  std::lock_guard lock{mu};
  key k{std::string{shape}, weights, seed};
  if (auto it = cache.find(k); it != cache.end())
    return it->second;
  auto w = engine::load_model_weights(dir);
  if (!w)
    die(error_text(w.error()));
  std::shared_ptr<const engine::model_weights> sp{std::move(*w)};
  cache.emplace(k, sp);
  return sp;
}

std::shared_ptr<const engine::tokenizer> test_tokenizer(std::string_view shape) {
  static std::map<std::string, std::shared_ptr<const engine::tokenizer>> cache;
  const auto& dir = test_model_dir(shape);
  auto weights = test_model_weights(shape);
  std::lock_guard lock{mu};
  if (auto it = cache.find(std::string{shape}); it != cache.end())
    return it->second;
  auto tok = engine::load_tokenizer(dir, weights->config);
  if (!tok)
    die(error_text(tok.error()));
  std::shared_ptr<const engine::tokenizer> sp{std::move(*tok)};
  cache.emplace(std::string{shape}, sp);
  return sp;
}

std::unique_ptr<engine::engine> make_test_engine(std::string_view shape,
                                                 const test_engine_options& opts) {
  auto weights = test_model_weights(shape, opts.weights, opts.seed);
  auto be = engine::cpu::make_cpu_backend(weights, opts.backend);
  if (!be)
    die(error_text(be.error()));
  std::shared_ptr<const engine::tokenizer> tok;
  if (opts.with_tokenizer)
    tok = test_tokenizer(shape);
  return std::make_unique<engine::engine>(std::move(*be), opts.engine, tok);
}

} // namespace tessera::test
