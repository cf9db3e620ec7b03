#pragma once
// The serve options of the kv store end-to-end tests: one aggregated nano
// worker with a pool of 32 blocks and a kv store of 3 blocks' room in host
// memory, the rest on disk under `dir`, so a conversation's blocks leave
// the pool and the host tier and come back from RocksDB.

#include <filesystem>

#include "actors/node/serve_node.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::test {

inline actors::serve_options kv_store_node_options(const std::filesystem::path& dir) {
  auto probe = make_test_engine("nano");
  const size_t bb = probe->get_backend().layout().block_bytes();
  actors::serve_options o;
  o.model_dir = test_model_dir("nano");
  o.model_name = "nano";
  o.mode = "agg";
  o.port = 0;
  o.threads_per_worker = 1;
  o.kv_cache_bytes = 32 * bb;
  o.kv_store_host_bytes = 3 * (bb + 128);
  o.kv_store_disk_dir = dir;
  return o;
}

} // namespace tessera::test
