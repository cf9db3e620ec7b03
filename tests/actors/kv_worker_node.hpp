#pragma once
/// @file
/// What the kv store actor tests with workers on one loopback node share:
/// the nano engine their workers run (64 blocks, one thread), a request's
/// output on such an engine alone (the answer every cached run must equal),
/// and the bridge protocol of a node with workers, a token sink and a kv
/// store.

#include <memory>

#include "actors/bridge/bridge_protocol.hpp"
#include "actors/common/token_sink.hpp"
#include "actors/kvstore/kvstore_actor.hpp"
#include "actors/worker/worker_actor.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::actors::kv_worker_node {

inline std::unique_ptr<engine::engine> make_engine() {
  tessera::test::test_engine_options o;
  o.backend.num_blocks = 64;
  o.backend.threads = 1;
  o.with_tokenizer = true;
  return tessera::test::make_test_engine("nano", o);
}

/// `r` on an engine of its own, without any cache.
inline tessera::test::run_result alone(const engine::request& r) {
  auto eng = make_engine();
  return tessera::test::run_one(*eng, r);
}

inline std::shared_ptr<const bridge_protocol> protocol() {
  auto p = std::make_shared<bridge_protocol>();
  p->add<worker_actor>().add<token_sink_actor>().add<kvstore_actor>();
  return p;
}

} // namespace tessera::actors::kv_worker_node
