#include "common/error.hpp"

#include <gtest/gtest.h>

#include "engine/engine_errc.hpp"

namespace {

using tessera::engine::engine_errc;
using tessera::engine::make_engine_error;

TEST(ErrorTest, TextNamesCategoryAndMessage) {
  auto err = make_engine_error(engine_errc::bad_config, "config.json: missing 'hidden_size'");
  EXPECT_EQ(tessera::error_text(err), "engine: config.json: missing 'hidden_size'");
  EXPECT_EQ(tessera::error_message(err), "config.json: missing 'hidden_size'");
  EXPECT_TRUE(err == engine_errc::bad_config);
  EXPECT_FALSE(err == engine_errc::bad_weights);
}

TEST(ErrorTest, NoErrorReadsNone) {
  EXPECT_EQ(tessera::error_text(caf::error{}), "none");
  EXPECT_EQ(tessera::error_message(caf::error{}), "");
}

} // namespace
