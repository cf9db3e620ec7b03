#pragma once
/// @file
/// Random-weight test models, written once per test process.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include "engine/cpu/cpu_backend.hpp"
#include "engine/engine.hpp"
#include "engine/tokenizer.hpp"
#include "engine/weights.hpp"

namespace tessera::test {

/// Folder of a model of `shape` (see engine::model_shape) with the demo
/// tokenizer, written on first use into a temp dir that lives as long as
/// the process. Aborts the test binary if writing fails.
const std::filesystem::path& test_model_dir(std::string_view shape,
                                            engine::dtype weights = engine::dtype::bf16,
                                            uint64_t seed = 1);

/// The loaded weights of test_model_dir(shape, weights, seed), cached.
std::shared_ptr<const engine::model_weights>
test_model_weights(std::string_view shape, engine::dtype weights = engine::dtype::bf16,
                   uint64_t seed = 1);

/// The demo tokenizer of test_model_dir(shape), cached.
std::shared_ptr<const engine::tokenizer> test_tokenizer(std::string_view shape);

/// Options for make_test_engine.
struct test_engine_options {
  engine::dtype weights = engine::dtype::bf16;
  uint64_t seed = 1;
  engine::cpu::cpu_backend_options backend;
  engine::engine_config engine;
  bool with_tokenizer = false;
};

/// An engine over the CPU backend on a test model.
std::unique_ptr<engine::engine> make_test_engine(std::string_view shape,
                                                 const test_engine_options& opts = {});

} // namespace tessera::test
