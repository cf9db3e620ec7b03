// The cluster the `tessera chaos` tests run: the nano test model on free
// ports, and the harness's JSON report read back.
#pragma once

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_tessera.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::test {

/// One [[node]] of a chaos cluster: its id and its TOML roles list's items.
struct chaos_node {
  const char* id;
  const char* roles;
  /// More lines of its [[node]] table (e.g. store = "..."); may be null.
  const char* extra = nullptr;
};

/// Writes `dir`/cluster.secret (owner-only) and `dir`/cluster.toml serving
/// nano: the settings every chaos test shares, then `extra` (TOML lines),
/// then `nodes` on free ports, the first with the HTTP port. Returns the
/// config's path.
inline std::filesystem::path write_chaos_cluster(const std::filesystem::path& dir, const std::string& extra,
                                                 std::initializer_list<chaos_node> nodes) {
  const auto secret = dir / "cluster.secret";
  std::ofstream(secret) << "test-cluster-secret-0123456789abcdef\n";
  std::filesystem::permissions(secret, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace);
  const auto file = dir / "cluster.toml";
  std::ofstream out{file};
  out << "model = \"" << test_model_dir("nano").string() << "\"\n"
      << "served_model_name = \"nano\"\nmax_local_prefill_tokens = 32\nucx_tls = \"tcp\"\n"
      << "cluster_secret_file = \"cluster.secret\"\nadmin_key_file = \"admin.key\"\nthreads_per_worker = 1\n"
      << "kv_cache_mb = 8\n"
      << extra;
  bool first = true;
  for (const auto& n : nodes) {
    out << "[[node]]\nid = \"" << n.id << "\"\naddress = \"127.0.0.1:" << free_port() << "\"\nroles = [" << n.roles
        << "]\nmetrics = \"127.0.0.1:" << free_port() << "\"\n";
    if (n.extra != nullptr)
      out << n.extra << "\n";
    if (first)
      out << "http = \"127.0.0.1:" << free_port() << "\"\n";
    first = false;
  }
  return file;
}

/// The harness's --json report at `path`; null when it is missing or not JSON.
inline nlohmann::json read_chaos_report(const std::filesystem::path& path) {
  std::ifstream in{path};
  if (!in)
    return nullptr;
  auto j = nlohmann::json::parse(in, nullptr, false);
  return j.is_discarded() ? nlohmann::json{} : j;
}

/// What a clean run of `tessera chaos` (`r`, its report `j`) shows: exit
/// 0, more than `min_sent` requests, none wrong, lost or failed, and every
/// event applied.
inline void expect_clean_chaos_run(const run_result& r, const nlohmann::json& j, int min_sent) {
  ASSERT_TRUE(j.is_object()) << r.out;
  const auto& t = j["totals"];
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_GT(t["sent"].get<int>(), min_sent) << r.out;
  EXPECT_EQ(t["wrong"], 0) << r.out;
  EXPECT_EQ(t["lost"], 0) << r.out;
  EXPECT_EQ(t["failed"], 0) << r.out;
  EXPECT_EQ(t["completed"], t["sent"]) << r.out;
  ASSERT_FALSE(j["events"].empty()) << r.out;
  for (const auto& e : j["events"])
    EXPECT_EQ(e["error"], "") << e.dump() << "\n" << r.out;
}

/// The whole text of the file at `p` (empty when it cannot be read).
inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in{p};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

} // namespace tessera::test
