#include "actors/frontend/token_order.hpp"

#include <gtest/gtest.h>

namespace {

using namespace tessera;
using tessera::actors::frontend::token_order;

engine::request_output chunk(int32_t output_tokens, std::vector<int32_t> tokens,
                             engine::finish_reason finish = engine::finish_reason::none) {
  engine::request_output o;
  o.id = 1;
  o.tokens = std::move(tokens);
  o.output_tokens = output_tokens;
  o.finish = finish;
  return o;
}

TEST(TokenOrderTest, PassesChunksInOrderAndHoldsEarlyOnesUntilTheGapFills) {
  token_order order;
  EXPECT_EQ(order.accept(chunk(2, {11})).size(), 0u); // token #1 before #0
  EXPECT_EQ(order.waiting(), 1u);
  auto ready = order.accept(chunk(1, {10}));
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].tokens, std::vector<int32_t>{10});
  EXPECT_EQ(ready[1].tokens, std::vector<int32_t>{11});
  EXPECT_EQ(order.received(), 2);
  // A final chunk without tokens passes at once.
  ready = order.accept(chunk(2, {}, engine::finish_reason::length));
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].finish, engine::finish_reason::length);
}

TEST(TokenOrderTest, DropsDuplicates) {
  token_order order;
  EXPECT_EQ(order.accept(chunk(1, {10})).size(), 1u);
  EXPECT_EQ(order.accept(chunk(1, {10})).size(), 0u);
  EXPECT_EQ(order.received(), 1);
}

} // namespace
