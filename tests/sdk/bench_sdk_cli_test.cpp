// `tessera bench serve --sdk` drives a real `tessera node` over the SDK in
// both of its styles, chunk callbacks (the default) and a blocking thread
// per request (--sdk-threads): every request answers in full, no errors.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;

TEST(BenchSdkCliTest, BothSdkStylesAnswerEveryRequestInFull) {
  tessera::test::temp_dir dir{"tessera-bench-sdk"};
  const auto d = dir.path();
  auto r = tessera::test::run_tessera("model init --shape nano --out " + (d / "model").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ofstream(d / "cluster.secret") << "bench-sdk-cluster-secret-0123456789\n";
  fs::permissions(d / "cluster.secret", fs::perms::owner_read | fs::perms::owner_write,
                  fs::perm_options::replace);
  const std::string address = "127.0.0.1:" + std::to_string(tessera::test::free_port());
  const std::string http = "127.0.0.1:" + std::to_string(tessera::test::free_port());
  std::ofstream(d / "c.toml") << "model = \"" << (d / "model").string() << "\"\n"
                              << "threads_per_worker = 1\nkv_cache_mb = 16\nucx_tls = \"tcp\"\n"
                              << "cluster_secret_file = \"cluster.secret\"\n"
                              << "[[node]]\nid = \"front\"\naddress = \"" << address << "\"\n"
                              << "roles = [\"frontend\", \"router\", \"worker\"]\nhttp = \"" << http << "\"\n";
  const std::string cmd = "exec \"$0\" node --config " + (d / "c.toml").string() + " --node front 2>" +
                          (d / "front.log").string();
  auto n = tessera::child_process::spawn("/bin/sh", {"-c", cmd, tessera::test::tessera_binary()});
  ASSERT_TRUE(n) << tessera::error_text(n.error());
  bool ready = false;
  for (int i = 0; i < 600 && !ready; ++i) {
    ready = tessera::test::http_get("http://" + http + "/ready").status == 200;
    if (!ready)
      std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(ready) << "the node did not become ready";
  for (const std::string style : {"", " --sdk-threads"}) {
    const auto out = d / ("bench" + std::to_string(style.size()) + ".json");
    auto b = tessera::test::run_tessera("bench serve --url http://" + http + " --sdk " + address +
                                        " --cluster-secret-file " + (d / "cluster.secret").string() +
                                        " --quick --json " + out.string() + style);
    ASSERT_EQ(b.exit_code, 0) << style << "\n" << b.out;
    const json j = json::parse(std::ifstream(out));
    ASSERT_FALSE(j.at("levels").empty());
    for (const auto& level : j.at("levels")) {
      const auto& s = level.at("sdk");
      EXPECT_EQ(s.at("errors").get<int>(), 0) << style;
      EXPECT_EQ(s.at("requests").get<int64_t>(), level.at("requests").get<int64_t>()) << style;
      EXPECT_EQ(s.at("output_tokens").get<int64_t>(),
                s.at("requests").get<int64_t>() * j.at("output_tokens").get<int64_t>())
          << style;
    }
  }
  n->kill(SIGTERM);
  (void)n->wait(30s);
}

} // namespace
