// Three `tessera node` processes (frontend + router, prefill, decode) from
// one config, talking over UCX on loopback: every prompt prefills on the
// prefill node, its KV goes to the decode node by RMA, and the tokens come
// back to the frontend; the output equals one engine alone, token for
// token (greedy and seeded); likewise with speculative decoding set in the
// config.

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <tuple>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/served_output.hpp"
#include "tests/support/sockets.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace {

using namespace std::chrono_literals;
using namespace tessera;
using nlohmann::json;
using tessera::test::free_port;

/// Writes a cluster secret (mode 600) into `dir` and returns the config
/// line naming it: every multi-node cluster here runs with the secret on.
std::string secret_line(const std::filesystem::path& dir) {
  const auto file = dir / "cluster.secret";
  std::ofstream(file) << "test-cluster-secret-0123456789abcdef\n";
  std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace);
  return "cluster_secret_file = \"cluster.secret\"\n";
}

/// What a stray or hostile process on the network can try against a
/// node's cluster port (its front door): 17 zero bytes (which aborted
/// UCX 1.13's sockaddr listener), garbage, a truncated handshake, a
/// declared 1 GiB handshake message, and joins without and with a wrong
/// secret.
void attack_node(uint16_t port) {
  auto raw_send = [port](const std::vector<uint8_t>& bytes, std::chrono::milliseconds linger) {
    EXPECT_TRUE(tessera::test::raw_send(port, bytes, linger)) << "cannot reach port " << port;
  };
  raw_send(std::vector<uint8_t>(17, 0), 500ms);
  std::vector<uint8_t> garbage(4096);
  for (size_t i = 0; i < garbage.size(); ++i)
    garbage[i] = static_cast<uint8_t>(i * 131 + 7);
  raw_send(garbage, 500ms);
  std::vector<uint8_t> truncated(14, 'T');
  truncated[0] = 100;
  truncated[1] = truncated[2] = truncated[3] = 0;
  raw_send(truncated, 50ms);
  raw_send({0, 0, 0, 0x40}, 500ms);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  for (const std::string key : {"", "not-the-cluster-secret-0123456789"}) {
    transport::transport_options o;
    o.cluster_secret = key;
    o.identity = "decode"; // claims a real node's id, too
    o.peer_timeout = 2s;
    auto rogue = transport::ucx_transport::make(o, {});
    ASSERT_TRUE(rogue) << error_text(rogue.error());
    auto p = (*rogue)->connect(address);
    EXPECT_FALSE(p) << "a rogue joined node at " << address;
  }
}

/// Starts `tessera node --config config --node id` for each id, in order,
/// and waits until each says it is ready.
std::vector<child_process> start_nodes(const std::filesystem::path& config, std::initializer_list<const char*> ids) {
  const std::string bin = std::string{getenv("TESSERA_BINARY_DIR")} + "/cli/tessera";
  std::vector<child_process> nodes;
  for (const char* id : ids) {
    auto n = child_process::spawn(bin, {"node", "--config", config.string(), "--node", id});
    EXPECT_TRUE(n) << error_text(n.error());
    if (!n)
      return {};
    nodes.push_back(std::move(*n));
  }
  for (auto& n : nodes) {
    auto ready = n.read_line(60s);
    EXPECT_TRUE(ready) << error_text(ready.error());
    if (!ready)
      return {};
    EXPECT_NE(ready->find("ready"), std::string::npos) << *ready;
  }
  return nodes;
}

/// Whether the frontend at `url` reports `workers` workers within 15 s
/// (the nodes connect and join in the background).
bool wait_healthy(const std::string& url, int workers) {
  const auto want = "\"workers\":" + std::to_string(workers);
  for (int i = 0; i < 300; ++i) {
    if (tessera::test::http_get(url + "/health").body.find(want) != std::string::npos)
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

/// Stops the nodes with SIGTERM; each must exit cleanly.
void stop_nodes(std::vector<child_process>& nodes) {
  for (auto& n : nodes)
    n.kill(SIGTERM);
  for (auto& n : nodes) {
    auto code = n.wait(30s);
    ASSERT_TRUE(code) << error_text(code.error());
    EXPECT_EQ(*code, 0) << "a node did not stop cleanly";
  }
}

/// A frontend + router node and two decode nodes "a" and "b" (each with a
/// metrics endpoint) from a config with `settings` (the model and what
/// else a test sets) on top of one thread per worker, tcp and a cluster
/// secret: started, in the order a, b, front, and healthy.
struct two_decode_cluster {
  std::vector<child_process> nodes;
  std::string url;
  uint16_t metrics[2] = {};
};

two_decode_cluster start_two_decode_nodes(const tessera::test::temp_dir& dir, const std::string& settings) {
  two_decode_cluster c;
  const auto http = free_port();
  c.metrics[0] = free_port();
  c.metrics[1] = free_port();
  std::ofstream(dir.path() / "c.toml")
    << settings << "served_model_name = \"nano\"\nthreads_per_worker = 1\nucx_tls = \"tcp\"\n"
    << secret_line(dir.path()) << "[[node]]\nid = \"front\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"frontend\", \"router\"]\nhttp = \"127.0.0.1:" << http << "\"\n"
    << "[[node]]\nid = \"a\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"decode\"]\nmetrics = \"127.0.0.1:" << c.metrics[0] << "\"\n"
    << "[[node]]\nid = \"b\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"decode\"]\nmetrics = \"127.0.0.1:" << c.metrics[1] << "\"\n";
  c.nodes = start_nodes(dir.path() / "c.toml", {"a", "b", "front"});
  c.url = "http://127.0.0.1:" + std::to_string(http);
  if (c.nodes.size() == 3 && !wait_healthy(c.url, 2)) {
    ADD_FAILURE() << "the cluster did not come up";
    c.nodes.clear();
  }
  return c;
}

/// Streams `body` to /v1/completions at `url` through curl (the request
/// written into `dir`).
caf::expected<child_process> stream_request(const tessera::test::temp_dir& dir, const std::string& url,
                                            const json& body) {
  std::ofstream(dir.path() / "b") << body.dump();
  return child_process::spawn("/usr/bin/curl", {"-sN", "-H", "Content-Type: application/json", "--data-binary",
                                                "@" + (dir.path() / "b").string(), url + "/v1/completions"});
}

/// Which decode node of `c` (0: a, 1: b) holds KV blocks now, i.e. serves
/// the one stream running; 2 if neither.
size_t node_holding_blocks(const two_decode_cluster& c) {
  for (size_t i = 0; i < 2; ++i)
    if (tessera::test::metric_sum(
          tessera::test::http_get("http://127.0.0.1:" + std::to_string(c.metrics[i]) + "/metrics").body,
          "tessera_kv_blocks_used") > 0)
      return i;
  return 2;
}

TEST(ClusterTest, ThreeProcessesOverUcxEqualOneEngine) {
  tessera::test::temp_dir dir;
  const auto http = free_port();
  const auto prefill_metrics = free_port();
  const uint16_t node_ports[3] = {free_port(), free_port(), free_port()};
  std::ofstream(dir.path() / "c.toml")
    << "model = \"" << tessera::test::test_model_dir("nano").string() << "\"\n"
    << "served_model_name = \"nano\"\nmax_local_prefill_tokens = 0\nthreads_per_worker = 1\n"
    << "kv_cache_mb = 8\nucx_tls = \"tcp\"\n" << secret_line(dir.path())
    << "[[node]]\nid = \"front\"\naddress = \"127.0.0.1:" << node_ports[0]
    << "\"\nroles = [\"frontend\", \"router\"]\nhttp = \"127.0.0.1:" << http << "\"\n"
    << "[[node]]\nid = \"prefill\"\naddress = \"127.0.0.1:" << node_ports[1]
    << "\"\nroles = [\"prefill\"]\nmetrics = \"127.0.0.1:" << prefill_metrics << "\"\n"
    << "[[node]]\nid = \"decode\"\naddress = \"127.0.0.1:" << node_ports[2]
    << "\"\nroles = [\"decode\"]\n";
  auto nodes = start_nodes(dir.path() / "c.toml", {"decode", "prefill", "front"});
  ASSERT_EQ(nodes.size(), 3u);
  const std::string url = "http://127.0.0.1:" + std::to_string(http);
  ASSERT_TRUE(wait_healthy(url, 2)) << "the cluster did not come up";
  // A rogue on loopback tries every node's cluster port first: none of it
  // may crash a node, join, or change an answer below.
  for (auto port : node_ports)
    attack_node(port);
  for (float temperature : {0.0f, 0.8f})
    for (int len : {7, 33}) {
      std::mt19937_64 rng{static_cast<uint64_t>(len)};
      std::vector<int32_t> prompt;
      for (int i = 0; i < len; ++i)
        prompt.push_back(static_cast<int32_t>(8 + rng() % 500));
      json body = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", 10},
                   {"temperature", temperature}, {"seed", 5}, {"ignore_eos", true}, {"logprobs", 0}};
      auto out = tessera::test::http_post_json(url + "/v1/completions", body.dump()).body;
      auto j = json::parse(out, nullptr, false);
      ASSERT_TRUE(j.is_object() && j.contains("choices")) << out;
      EXPECT_EQ(tessera::test::from_completion(j),
                tessera::test::run_alone("nano", prompt, 10, temperature, 5))
        << len << " tokens, t=" << temperature;
    }
  // Every token of the four requests came back through the frontend.
  auto metrics = tessera::test::http_get(url + "/metrics").body;
  EXPECT_NE(metrics.find("tessera_generation_tokens_total 40"), std::string::npos) << metrics;
  // The prefill node's own series are on its metrics endpoint: it put the
  // four prompts' KV into the decode node's pool.
  auto prefill = tessera::test::http_get("http://127.0.0.1:" + std::to_string(prefill_metrics) + "/metrics");
  EXPECT_EQ(prefill.status, 200);
  EXPECT_NE(prefill.body.find("tessera_kv_transfer_bytes_total{worker=\"prefill-0\"}"), std::string::npos)
    << prefill.body;
  EXPECT_EQ(prefill.body.find("tessera_kv_transfer_bytes_total{worker=\"prefill-0\"} 0\n"), std::string::npos)
    << prefill.body;
  // ... and it counted the rogue's attempts on its cluster port (the
  // bridge exports its counts once a second).
  for (const char* reason : {"malformed", "oversize", "closed"}) {
    const std::string series = std::string{"tessera_wire_rejected_peers_total{reason=\""} + reason + "\"}";
    std::string body;
    for (int i = 0; i < 50; ++i) {
      body = tessera::test::http_get("http://127.0.0.1:" + std::to_string(prefill_metrics) + "/metrics").body;
      if (body.find(series) != std::string::npos)
        break;
      std::this_thread::sleep_for(100ms);
    }
    EXPECT_NE(body.find(series), std::string::npos) << reason << "\n" << body;
  }
  // The decode node dies without a word: the frontend's node notices (its
  // bridge's peer fails), the router stops sending there, and a new
  // request gets a clear 503 instead of hanging.
  nodes[0].kill(SIGKILL);
  (void) nodes[0].wait(10s);
  tessera::test::http_reply answer;
  const auto killed = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) {
    answer = tessera::test::http_post_json(url + "/v1/completions",
                                           R"({"model": "nano", "prompt": "hi", "max_tokens": 4})");
    if (answer.status == 503)
      break;
    std::this_thread::sleep_for(50ms); // until the failure is noticed (bounded by the peer timeout)
  }
  EXPECT_EQ(answer.status, 503) << answer.body;
  EXPECT_NE(answer.body.find("no healthy worker can decode"), std::string::npos) << answer.body;
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 10s);
  nodes.erase(nodes.begin());
  stop_nodes(nodes);
}

// Two worker nodes, each with its own kv store, and round-robin routing:
// the second turn of a conversation lands on the node that did not serve
// the first, which fetches the first turn's blocks from the other node's
// store over UCX (the router names it) instead of computing them, and
// still answers exactly as one engine alone.
TEST(ClusterTest, ANextTurnOnAnotherNodeFetchesItsPrefixFromThatNodesStore) {
  tessera::test::temp_dir dir;
  auto cluster = start_two_decode_nodes(
    dir, "model = \"" + tessera::test::test_model_dir("nano").string() + "\"\nrouter_policy = \"round-robin\"\n"
         "kv_cache_mb = 8\nkvstore_host_mb = 16\n");
  auto& nodes = cluster.nodes;
  ASSERT_EQ(nodes.size(), 3u);
  const auto& url = cluster.url;
  const auto& metrics = cluster.metrics;
  auto complete = [&](const std::vector<int32_t>& prompt) {
    json body = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", 10}, {"temperature", 0},
                 {"ignore_eos", true}, {"logprobs", 0}};
    return json::parse(tessera::test::http_post_json(url + "/v1/completions", body.dump()).body, nullptr, false);
  };
  std::mt19937_64 rng{11};
  std::vector<int32_t> prompt;
  for (int i = 0; i < 70; ++i)
    prompt.push_back(static_cast<int32_t>(8 + rng() % 500));
  auto first = complete(prompt);
  ASSERT_TRUE(first.is_object() && first.contains("choices")) << first.dump();
  const auto out1 = tessera::test::from_completion(first);
  EXPECT_EQ(out1, tessera::test::run_alone("nano", prompt, 10, 0.0f, 0));
  // The next turn: the whole first turn plus a few new tokens.
  const auto ids1 = tessera::test::run_one(*tessera::test::make_test_engine("nano"),
                                          tessera::test::make_request(1, prompt, 10))
                      .tokens; // the served text equals this run's, so its ids are these
  prompt.insert(prompt.end(), ids1.begin(), ids1.end());
  for (int i = 0; i < 9; ++i)
    prompt.push_back(static_cast<int32_t>(8 + rng() % 500));
  std::this_thread::sleep_for(1s); // the first node's store announces the turn to the router
  auto second = complete(prompt);
  ASSERT_TRUE(second.is_object() && second.contains("choices")) << second.dump();
  EXPECT_EQ(tessera::test::from_completion(second), tessera::test::run_alone("nano", prompt, 10, 0.0f, 0));
  // 70 + 10 tokens of the first turn: its 4 full blocks of 16 (the last
  // token's block is never fetched) came from the other node's store.
  const auto cached = second["usage"].value("prompt_tokens_details", json::object()).value("cached_tokens", 0);
  EXPECT_EQ(cached, 64) << second.dump();
  double peer = 0;
  for (auto port : metrics)
    peer += tessera::test::metric_sum(tessera::test::http_get("http://127.0.0.1:" + std::to_string(port) + "/metrics").body,
                       "tessera_kvstore_peer_fetched_blocks_total");
  EXPECT_EQ(peer, 4);
  stop_nodes(nodes);
}

} // namespace

namespace {

// Two decode nodes: the one serving a seeded stream is killed with
// SIGKILL mid-stream; the frontend's bridge notices, and the stream goes
// on on the other node from the tokens already sent, ending exactly as
// one engine alone would have (the client sees one uninterrupted answer).
TEST(ClusterTest, AStreamWhoseNodeIsKilledGoesOnOnAnotherNodeTokenForToken) {
  tessera::test::temp_dir dir;
  auto cluster = start_two_decode_nodes(
    dir, "model = \"" + tessera::test::test_model_dir("small").string() + "\"\nkv_cache_mb = 32\n");
  auto& nodes = cluster.nodes;
  ASSERT_EQ(nodes.size(), 3u);
  const auto& url = cluster.url;
  std::mt19937_64 rng{5};
  std::vector<int32_t> prompt;
  for (int i = 0; i < 30; ++i)
    prompt.push_back(static_cast<int32_t>(8 + rng() % 500));
  json body = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", 200}, {"temperature", 0.8},
               {"seed", 3},       {"ignore_eos", true}, {"logprobs", 0},   {"stream", true}};
  auto client = stream_request(dir, url, body);
  ASSERT_TRUE(client);
  auto first = client->read_line(30s);
  ASSERT_TRUE(first) << "no first chunk";
  const size_t serving = node_holding_blocks(cluster);
  ASSERT_LT(serving, 2u) << "neither node holds the stream";
  // The longest pause between chunks after the kill is the time the
  // stream took to go on elsewhere (detection, routing, recomputing).
  nodes[serving].kill(SIGKILL);
  std::string stream = *first + "\n";
  auto last = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration recovered{};
  for (;;) {
    auto line = client->read_line(60s);
    if (!line)
      break;
    const auto now = std::chrono::steady_clock::now();
    recovered = std::max(recovered, now - last);
    last = now;
    stream.append(*line).push_back('\n');
  }
  (void) nodes[serving].wait(10s);
  const auto recovery_ms = std::chrono::duration_cast<std::chrono::milliseconds>(recovered).count();
  RecordProperty("recovery_ms", static_cast<int>(recovery_ms));
  std::printf("longest pause of the stream after the kill: %lld ms\n", static_cast<long long>(recovery_ms));
  EXPECT_LT(recovered, 5s) << "the stream must go on within 5 s";
  (void) client->wait(5s);
  bool ended = false;
  const auto got = tessera::test::from_completion_stream(stream, ended);
  EXPECT_TRUE(ended) << stream.substr(stream.size() > 2000 ? stream.size() - 2000 : 0);
  EXPECT_EQ(stream.find("\"error\""), std::string::npos) << "no error event";
  const auto alone = tessera::test::run_alone("small", prompt, 200, 0.8f, 3);
  EXPECT_EQ(got.text, alone.text);
  EXPECT_EQ(got.finish, "length");
  const auto moved = tessera::test::metric_sum(tessera::test::http_get(url + "/metrics").body,
                                               "tessera_requests_migrated_total");
  EXPECT_GE(moved, 1);
  nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(serving));
  stop_nodes(nodes);
}

} // namespace

namespace {

/// POSTs `body` to `url` with `Authorization: Bearer key` (none if empty);
/// returns (status, body).
std::pair<int, std::string> post_as_admin(const std::string& url, const std::string& key, const std::string& body) {
  std::vector<std::string> args{"-s", "-w", "\n%{http_code}\n", "-H", "Content-Type: application/json",
                                "--data-binary", body};
  if (!key.empty()) {
    args.push_back("-H");
    args.push_back("Authorization: Bearer " + key);
  }
  args.push_back(url);
  auto c = child_process::spawn("/usr/bin/curl", args);
  if (!c)
    return {0, error_text(c.error())};
  std::vector<std::string> lines;
  while (auto line = c->read_line(10s))
    lines.push_back(*line);
  (void) c->wait(5s);
  if (lines.empty())
    return {0, ""};
  const int status = std::atoi(lines.back().c_str());
  lines.pop_back();
  std::string out;
  for (const auto& l : lines)
    out += l;
  return {status, out};
}

// An operator drains decode node "a" (POST /admin/drain with the admin
// key): the stream running there moves to "b" and ends exactly as one
// engine alone, new requests go to "b" only, and after the node is taken
// back it serves again. Without the key (or with a wrong one) the endpoint
// answers 401.
TEST(ClusterTest, ADrainedNodesStreamsMoveAndItGetsNoNewRequestUntilTakenBack) {
  tessera::test::temp_dir dir;
  const std::string key = "admin-key-0123456789abcdef";
  std::ofstream(dir.path() / "admin.key") << key << "\n";
  std::filesystem::permissions(dir.path() / "admin.key",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace);
  auto cluster = start_two_decode_nodes(dir, "model = \"" + tessera::test::test_model_dir("small").string() +
                                               "\"\nkv_cache_mb = 32\nadmin_key_file = \"admin.key\"\n");
  auto& nodes = cluster.nodes;
  ASSERT_EQ(nodes.size(), 3u);
  const auto& url = cluster.url;
  EXPECT_EQ(post_as_admin(url + "/admin/drain", "", R"({"node": "a"})").first, 401);
  EXPECT_EQ(post_as_admin(url + "/admin/drain", "not-the-admin-key-0123456789", R"({"node": "a"})").first, 401);
  EXPECT_EQ(post_as_admin(url + "/admin/drain", key, R"({"node": "nowhere"})").first, 404);
  std::mt19937_64 rng{9};
  std::vector<int32_t> prompt;
  for (int i = 0; i < 30; ++i)
    prompt.push_back(static_cast<int32_t>(8 + rng() % 500));
  json body = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", 120}, {"temperature", 0},
               {"ignore_eos", true}, {"logprobs", 0}, {"stream", true}};
  auto client = stream_request(dir, url, body);
  ASSERT_TRUE(client);
  auto first = client->read_line(30s);
  ASSERT_TRUE(first) << "no first chunk";
  const size_t serving = node_holding_blocks(cluster);
  ASSERT_LT(serving, 2u) << "neither node holds the stream";
  const std::string drained = serving == 0 ? "a" : "b";
  auto [status, answer] = post_as_admin(url + "/admin/drain", key, R"({"node": ")" + drained + R"("})");
  EXPECT_EQ(status, 200) << answer;
  EXPECT_NE(answer.find("\"moved\":1"), std::string::npos) << answer;
  std::string stream = *first + "\n";
  while (auto line = client->read_line(60s))
    stream.append(*line).push_back('\n');
  (void) client->wait(5s);
  bool ended = false;
  EXPECT_EQ(tessera::test::from_completion_stream(stream, ended).text,
            tessera::test::run_alone("small", prompt, 120, 0.0f, 0).text);
  EXPECT_TRUE(ended);
  // The drained node shows as unhealthy with the reason, and takes no new
  // request: a short one runs on the other node.
  auto health = tessera::test::http_get(url + "/health").body;
  EXPECT_NE(health.find("drained by an operator"), std::string::npos) << health;
  // Which node served it: the one whose worker offered its finished
  // blocks to its store (the health canaries, 1 token, offer none).
  auto offered = [&](size_t node) {
    return tessera::test::metric_sum(
      tessera::test::http_get("http://127.0.0.1:" + std::to_string(cluster.metrics[node]) + "/metrics").body,
      "tessera_kvstore_offered_blocks_total");
  };
  const size_t other = 1 - serving;
  const auto drained_before = offered(serving);
  const auto other_before = offered(other);
  std::vector<int32_t> fresh; // blocks no store holds yet
  for (int i = 0; i < 40; ++i)
    fresh.push_back(static_cast<int32_t>(8 + rng() % 500));
  json small = {{"model", "nano"}, {"prompt", fresh}, {"max_tokens", 4}, {"temperature", 0}};
  EXPECT_EQ(tessera::test::http_post_json(url + "/v1/completions", small.dump()).status, 200);
  for (int i = 0; i < 100 && offered(other) == other_before; ++i)
    std::this_thread::sleep_for(50ms);
  EXPECT_GT(offered(other), other_before) << "the other node served the new request";
  EXPECT_EQ(offered(serving), drained_before) << "the drained node served nothing new";
  auto back = post_as_admin(url + "/admin/drain", key, R"({"node": ")" + drained + R"(", "drain": false})");
  EXPECT_EQ(back.first, 200) << back.second;
  EXPECT_EQ(tessera::test::http_get(url + "/health").body.find("drained by an operator"), std::string::npos);
  stop_nodes(nodes);
}

} // namespace

namespace {

// speculative and draft_model in the config reach every worker the nodes
// start: with speculative = "draft:4" and the target itself as its draft
// (so every draft stands), a prefill + decode cluster answers greedy
// requests exactly as one engine alone without speculation, in fewer
// decode steps than tokens (the decode worker drafts); a request's own
// {"method": "ngram"} overrides the config, seeded sampling included.
TEST(ClusterTest, SpeculationFromTheConfigDraftsOnTheDecodeNodeAndEqualsOneEngine) {
  tessera::test::temp_dir dir;
  const auto http = free_port();
  const auto decode_metrics = free_port();
  const auto nano = tessera::test::test_model_dir("nano").string();
  std::ofstream(dir.path() / "c.toml")
    << "model = \"" << nano << "\"\nspeculative = \"draft:4\"\ndraft_model = \"" << nano << "\"\n"
    << "served_model_name = \"nano\"\nmax_local_prefill_tokens = 0\nthreads_per_worker = 1\n"
    << "kv_cache_mb = 8\nucx_tls = \"tcp\"\n" << secret_line(dir.path())
    << "[[node]]\nid = \"front\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"frontend\", \"router\"]\nhttp = \"127.0.0.1:" << http << "\"\n"
    << "[[node]]\nid = \"prefill\"\naddress = \"127.0.0.1:" << free_port() << "\"\nroles = [\"prefill\"]\n"
    << "[[node]]\nid = \"decode\"\naddress = \"127.0.0.1:" << free_port()
    << "\"\nroles = [\"decode\"]\nmetrics = \"127.0.0.1:" << decode_metrics << "\"\n";
  auto nodes = start_nodes(dir.path() / "c.toml", {"decode", "prefill", "front"});
  ASSERT_EQ(nodes.size(), 3u);
  const std::string url = "http://127.0.0.1:" + std::to_string(http);
  ASSERT_TRUE(wait_healthy(url, 2)) << "the cluster did not come up";
  auto decode_steps = [&] {
    return tessera::test::metric_sum(
      tessera::test::http_get("http://127.0.0.1:" + std::to_string(decode_metrics) + "/metrics").body,
      "tessera_engine_steps_total");
  };
  auto complete = [&](const std::vector<int32_t>& prompt, float temperature, const json& speculative) {
    json body = {{"model", "nano"}, {"prompt", prompt}, {"max_tokens", 32}, {"temperature", temperature},
                 {"seed", 5},       {"ignore_eos", true}, {"logprobs", 0}};
    if (!speculative.is_null())
      body["speculative"] = speculative;
    auto out = tessera::test::http_post_json(url + "/v1/completions", body.dump());
    EXPECT_EQ(out.status, 200) << out.body;
    return json::parse(out.body, nullptr, false);
  };
  const double steps_before = decode_steps();
  int tokens = 0;
  for (int len : {7, 33, 50}) {
    const auto prompt = tessera::test::random_prompt(len, static_cast<uint64_t>(len));
    auto j = complete(prompt, 0.0f, nullptr);
    ASSERT_TRUE(j.is_object() && j.contains("choices")) << j.dump();
    EXPECT_EQ(tessera::test::from_completion(j), tessera::test::run_alone("nano", prompt, 32, 0.0f, 5)) << len;
    tokens += 32;
  }
  // The prefill node computes each first token; the decode node the other
  // 31, five a step while the drafts stand (plain decoding: one a step).
  const double steps = decode_steps() - steps_before;
  EXPECT_GT(steps, 0) << "the decode node ran no step";
  EXPECT_LT(steps, tokens / 2) << "the decode node did not draft: " << steps << " steps for " << tokens
                               << " tokens";
  for (float temperature : {0.0f, 0.8f}) {
    const auto prompt = tessera::test::random_prompt(20, 7);
    auto j = complete(prompt, temperature, {{"method", "ngram"}, {"num_tokens", 4}});
    ASSERT_TRUE(j.is_object() && j.contains("choices")) << j.dump();
    EXPECT_EQ(tessera::test::from_completion(j), tessera::test::run_alone("nano", prompt, 32, temperature, 5))
      << "t=" << temperature;
  }
  stop_nodes(nodes);
}

/// Runs `tessera node --config config --node id` until it exits (at most
/// 60 s): its exit code (-1: it did not exit) and all it printed.
std::pair<int, std::string> run_node_to_exit(const std::filesystem::path& config, const std::string& id) {
  const std::string bin = std::string{getenv("TESSERA_BINARY_DIR")} + "/cli/tessera";
  auto n = child_process::spawn("/bin/sh",
                                {"-c", "exec '" + bin + "' node --config '" + config.string() + "' --node " + id + " 2>&1"});
  if (!n)
    return {-1, error_text(n.error())};
  std::string out;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    auto line = n->read_line(60s);
    if (!line)
      break;
    out.append(*line).push_back('\n');
  }
  auto code = n->wait(5s);
  if (!code) {
    n->kill(SIGKILL);
    return {-1, out};
  }
  return {*code, out};
}

// A draft model that cannot serve stops a worker node's start, named: a
// folder that does not load, or one whose tokenizer is not the model's;
// draft:K without draft_model is refused before anything loads.
TEST(ClusterTest, ANodeRefusesADraftModelThatCannotServeNamingTheKey) {
  tessera::test::temp_dir dir;
  const auto nano = tessera::test::test_model_dir("nano").string();
  auto write = [&](const std::string& settings) {
    std::ofstream(dir.path() / "c.toml")
      << "model = \"" << nano << "\"\n" << settings << "threads_per_worker = 1\nkv_cache_mb = 8\n"
      << "[[node]]\nid = \"solo\"\naddress = \"127.0.0.1:" << free_port()
      << "\"\nroles = [\"frontend\", \"router\", \"worker\"]\nhttp = \"127.0.0.1:" << free_port() << "\"\n";
  };
  const auto nowhere = (dir.path() / "nowhere").string();
  write("speculative = \"draft:4\"\ndraft_model = \"" + nowhere + "\"\n");
  auto [code, out] = run_node_to_exit(dir.path() / "c.toml", "solo");
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, -1) << "the node started with a draft model folder that does not exist";
  EXPECT_NE(out.find("draft_model '" + nowhere + "'"), std::string::npos) << out;
  // Another vocabulary and tokenizer (the micro shape's).
  const auto micro = tessera::test::test_model_dir("micro").string();
  write("draft_model = \"" + micro + "\"\n");
  std::tie(code, out) = run_node_to_exit(dir.path() / "c.toml", "solo");
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, -1) << "the node started with a draft model of another vocabulary";
  EXPECT_NE(out.find("draft_model '" + micro + "'"), std::string::npos) << out;
  EXPECT_NE(out.find("tokenizer"), std::string::npos) << out;
  write("speculative = \"draft:4\"\n");
  std::tie(code, out) = run_node_to_exit(dir.path() / "c.toml", "solo");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("'speculative' 'draft:4' needs a draft model: set draft_model"), std::string::npos) << out;
}

} // namespace
