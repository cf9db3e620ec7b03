// `tessera serve` on a kv store disk directory whose RocksDB WAL was
// damaged (40 flipped bytes in a fragment header: RocksDB refuses to open
// it, "Corruption: Write batch content corrupted") starts anyway: the
// directory is moved aside, the tier starts cold, one warning line names
// both, /health and /metrics say so, and the server serves.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "kvstore/rocksdb_tier.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::child_process;
namespace fs = std::filesystem;

/// Writes six 64 KiB blocks into a disk tier at `dir` (they stay in the
/// WAL), then flips 40 bytes at the WAL's second 32 KiB block.
void write_store_with_a_corrupt_wal(const fs::path& dir) {
  tessera::kvstore::rocksdb_tier_options o;
  o.dir = dir;
  o.capacity_bytes = 16 << 20;
  {
    auto t = tessera::kvstore::rocksdb_tier::open(o);
    ASSERT_TRUE(t) << tessera::error_text(t.error());
    tessera::engine::kv_layout l;
    l.block_tokens = 4;
    l.num_layers = 2;
    l.num_kv_heads = 2;
    l.head_dim = 1024;
    l.kv_dtype = tessera::engine::dtype::bf16;
    for (uint64_t i = 1; i <= 6; ++i) {
      std::vector<std::byte> bytes(l.block_bytes(), std::byte{static_cast<unsigned char>(i)});
      auto b = tessera::kvstore::make_block(l, l.block_tokens, std::move(bytes));
      ASSERT_EQ((*t)->put({7, i}, b), tessera::kvstore::rocksdb_tier::put_status::stored);
    }
  }
  fs::path wal;
  for (const auto& e : fs::directory_iterator{dir})
    if (e.path().extension() == ".log")
      wal = e.path();
  ASSERT_FALSE(wal.empty()) << "no WAL in " << dir;
  std::fstream f{wal, std::ios::in | std::ios::out | std::ios::binary};
  f.seekp(32768);
  const std::string garbage(40, '\xA5');
  f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
}

TEST(KvDiskResetCliTest, ServeStartsOnACorruptWalAndSaysSoOnHealth) {
  tessera::test::temp_dir dir{"tessera-kv-reset"};
  const auto disk = dir.path() / "kv";
  write_store_with_a_corrupt_wal(disk);
  const auto log = dir.path() / "serve.log";
  const auto port = tessera::test::free_port();
  const std::string cmd = "exec \"$0\" serve --model " + tessera::test::test_model_dir("nano").string() +
                          " --served-model-name nano --port " + std::to_string(port) + " --kv-cache-mb 8 --kv-store-host-mb 16" +
                          " --kv-store-disk-dir " + disk.string() + " 2>" + log.string();
  auto server = child_process::spawn("/bin/sh", {"-c", cmd, tessera::test::tessera_binary()});
  ASSERT_TRUE(server) << tessera::error_text(server.error());
  bool listening = false;
  for (int i = 0; i < 50 && !listening; ++i) {
    auto line = server->read_line(60s);
    if (!line)
      break;
    listening = line->find("listening on") != std::string::npos;
  }
  ASSERT_TRUE(listening) << "the server did not start";
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  tessera::test::http_reply health;
  for (int i = 0; i < 200; ++i) {
    health = tessera::test::http_get(url + "/health");
    if (health.status == 200)
      break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_NE(health.body.find("\"kv_store\":{"), std::string::npos) << health.body;
  EXPECT_NE(health.body.find("\"disk_reset\":true"), std::string::npos) << health.body;
  EXPECT_NE(health.body.find("Corruption"), std::string::npos) << health.body;
  EXPECT_NE(health.body.find(".corrupt-"), std::string::npos) << health.body;
  auto reply = tessera::test::http_post_json(url + "/v1/completions",
                                             R"({"model": "nano", "prompt": "hi", "max_tokens": 4})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  std::string metrics;
  for (int i = 0; i < 50; ++i) { // the store exports its counters with its heartbeat
    metrics = tessera::test::http_get(url + "/metrics").body;
    if (metrics.find("tessera_kvstore_disk_reset_total 1") != std::string::npos)
      break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_NE(metrics.find("tessera_kvstore_disk_reset_total 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tessera_kvstore_disk_disabled 0"), std::string::npos) << metrics;
  server->kill(SIGTERM);
  auto code = server->wait(30s);
  ASSERT_TRUE(code) << tessera::error_text(code.error());
  EXPECT_EQ(*code, 0);

  size_t moved = 0;
  for (const auto& e : fs::directory_iterator{dir.path()})
    moved += e.path().filename().string().starts_with("kv.corrupt-") ? 1 : 0;
  EXPECT_EQ(moved, 1u);
  EXPECT_TRUE(fs::is_directory(disk)) << "the fresh tier is where the old one was";
  std::ifstream in{log};
  std::stringstream text;
  text << in.rdbuf();
  size_t warnings = 0;
  std::string line;
  while (std::getline(text, line))
    if (line.find(" warning ") != std::string::npos) {
      ++warnings;
      EXPECT_NE(line.find(disk.string()), std::string::npos) << line;
      EXPECT_NE(line.find("Corruption"), std::string::npos) << line;
    }
  EXPECT_EQ(warnings, 1u) << text.str();
}

} // namespace
