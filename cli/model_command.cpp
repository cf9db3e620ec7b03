// `tessera model init`: writes a random-weight Llama-family model folder, or
// (--no-weights, and always for shapes above max_random_parameters) only its
// config and tokenizer: a folder for `--engine sim`.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer_builder.hpp"
#include "engine/weights.hpp"

namespace tessera::cli {

namespace {

/// Random weights beyond this many parameters are refused: gigabytes of
/// noise help no test, and the sim backend needs none.
constexpr int64_t max_random_parameters = int64_t{2} << 30;

struct model_init_args {
  std::string shape = "tiny";
  uint64_t seed = 0;
  std::string dtype = "bf16";
  std::string out;
  int shards = 1;
  bool no_weights = false;
  bool force = false;
};

/// The model files in `dir` that `model init` would replace.
std::string existing_model_files(const std::filesystem::path& dir) {
  std::string found;
  std::error_code ec;
  for (const char* f : {"config.json", "model.safetensors", "model.safetensors.index.json"})
    if (std::filesystem::exists(dir / f, ec))
      found += (found.empty() ? "" : ", ") + std::string{f};
  return found;
}

int run_model_init(const model_init_args& a) {
  auto cfg = engine::model_shape(a.shape);
  if (!cfg) {
    std::string names;
    for (const auto& n : engine::model_shape_names())
      names += (names.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "tessera: unknown shape '%s' (known: %s)\n", a.shape.c_str(), names.c_str());
    return 2;
  }
  auto dt = engine::parse_dtype(a.dtype);
  if (!dt || *dt == engine::dtype::f16) {
    std::fprintf(stderr, "tessera: --dtype must be bf16 or f32, got '%s'\n", a.dtype.c_str());
    return 2;
  }
  cfg->torch_dtype = *dt;
  // A typo in --out must not destroy a real model's weights.
  if (auto found = existing_model_files(a.out); !found.empty() && !a.force) {
    std::fprintf(stderr,
                 "tessera: %s already holds a model (%s); pass --force to overwrite it, or choose another --out\n",
                 a.out.c_str(), found.c_str());
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double params_m = static_cast<double>(cfg->parameter_count()) / 1e6;
  if (a.no_weights || cfg->parameter_count() > max_random_parameters) {
    std::fprintf(stderr,
                 "tessera: writing %s (%.1fM parameters) config-only, no weights%s, to %s ...\n",
                 a.shape.c_str(), params_m,
                 a.no_weights ? "" : " (random weights are written up to 2G parameters)",
                 a.out.c_str());
    if (auto err = engine::write_model_config(a.out, *cfg)) {
      std::fprintf(stderr, "tessera: %s\n", error_text(err).c_str());
      return 1;
    }
    if (auto err = engine::write_demo_tokenizer(a.out, cfg->vocab_size)) {
      std::fprintf(stderr, "tessera: %s\n", error_text(err).c_str());
      return 1;
    }
    std::fprintf(stderr, "tessera: done in %.1f s; serve it with --engine sim\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }
  engine::random_model_options opts;
  opts.seed = a.seed;
  opts.weight_dtype = *dt;
  opts.shards = a.shards;
  std::fprintf(stderr, "tessera: writing %s (%.1fM parameters, %s, seed %llu) to %s ...\n",
               a.shape.c_str(), params_m, a.dtype.c_str(),
               static_cast<unsigned long long>(a.seed), a.out.c_str());
  if (auto err = engine::write_random_model(a.out, *cfg, opts)) {
    std::fprintf(stderr, "tessera: %s\n", error_text(err).c_str());
    return 1;
  }
  if (auto err = engine::write_demo_tokenizer(a.out, cfg->vocab_size)) {
    std::fprintf(stderr, "tessera: %s\n", error_text(err).c_str());
    return 1;
  }
  std::fprintf(stderr, "tessera: done in %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

} // namespace

command add_model_command(CLI::App& app) {
  auto* model = app.add_subcommand("model", "Model folders: init");
  model->require_subcommand(1);
  auto* init = model->add_subcommand("init", "Write a random-weight model (config.json, "
                                             "model.safetensors, tokenizer.json), or its "
                                             "config only (--no-weights)");
  auto args = std::make_shared<model_init_args>();
  std::string shapes;
  for (const auto& n : engine::model_shape_names())
    shapes += (shapes.empty() ? "" : ", ") + n;
  init->add_option("--shape", args->shape, "Model shape: " + shapes)->capture_default_str();
  init->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  init->add_option("--dtype", args->dtype, "Weight dtype: bf16 or f32")->capture_default_str();
  init->add_option("--shards", args->shards, "Split into this many safetensors files")
    ->capture_default_str()
    ->check(CLI::Range(1, 64));
  init->add_option("--out", args->out, "Output folder")->required();
  init->add_flag("--no-weights", args->no_weights,
                 "Write config.json and the tokenizer only (for --engine sim); implied for "
                 "shapes above 2G parameters (llama3-8b, llama3-70b)");
  init->add_flag("--force", args->force,
                 "Overwrite the model files (config.json, model.safetensors) already in --out");
  return {model, [args] { return run_model_init(*args); }};
}

} // namespace tessera::cli
