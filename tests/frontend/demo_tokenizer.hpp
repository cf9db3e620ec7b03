#pragma once
/// @file
/// The demo model's tokenizer (512 ids, Llama 3 markers and template),
/// written into a test's folder and loaded, for the API layer's tests.

#include <filesystem>
#include <memory>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer.hpp"
#include "engine/tokenizer_builder.hpp"

namespace tessera::test {

/// The demo tokenizer written into `dir`; null (and a test failure) if it
/// cannot be written or loaded.
inline std::unique_ptr<engine::tokenizer> load_demo_tokenizer(const std::filesystem::path& dir) {
  if (auto err = engine::write_demo_tokenizer(dir, 512)) {
    ADD_FAILURE() << "writing the demo tokenizer: " << error_text(err);
    return nullptr;
  }
  auto tok = engine::load_tokenizer(dir, engine::model_config{});
  if (!tok) {
    ADD_FAILURE() << "loading the demo tokenizer: " << error_text(tok.error());
    return nullptr;
  }
  return std::move(*tok);
}

} // namespace tessera::test
