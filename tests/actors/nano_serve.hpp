// A whole single-process server (serve_node) of the random-weight nano
// test model, started and waited for until it is ready.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "actors/node/serve_node.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::test {

/// nano in `mode` on a free HTTP port, one thread a worker, 8 MiB of KV cache.
inline actors::serve_options nano_serve_options(const std::string& mode) {
  actors::serve_options o;
  o.model_dir = test_model_dir("nano");
  o.model_name = "nano";
  o.mode = mode;
  o.port = 0;
  o.threads_per_worker = 1;
  o.kv_cache_bytes = size_t{8} << 20;
  return o;
}

/// Starts `o` and waits (up to 10 s) until /ready answers 200: until its
/// workers have joined and are healthy, a server answers 503. Null, and a
/// test failure naming the error, when it does not start.
inline std::unique_ptr<actors::serve_node> start_ready(caf::actor_system& sys, const actors::serve_options& o) {
  auto n = actors::serve_node::start(sys, o);
  EXPECT_TRUE(n) << error_text(n.error());
  if (!n)
    return nullptr;
  for (int i = 0; i < 200 && http_get((*n)->url() + "/ready").status != 200; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return std::move(*n);
}

} // namespace tessera::test
