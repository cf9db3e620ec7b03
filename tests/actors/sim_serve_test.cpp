// `tessera serve --engine sim`: the single-process cluster (serve_node) on a
// config-only llama3-8b folder (no weights) answers completions, and a
// disaggregated request (its KV moved from the prefill to the decode
// worker) gives what one sim engine alone gives.
#include "actors/node/serve_node.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "common/error.hpp"
#include "engine/engine.hpp"
#include "engine/factory/backend_factory.hpp"
#include "engine/tokenizer.hpp"
#include "engine/tokenizer_builder.hpp"
#include "engine/weights.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/served_output.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::actors {
namespace {

using nlohmann::json;

engine::backend_choice sim_choice() {
  engine::backend_choice c;
  c.kind = engine::backend_kind::sim;
  c.sim.gpu = "h100";
  c.sim.time_scale = 0.01;
  c.sim.payload_scale = 256;
  return c;
}

constexpr size_t kv_cache_bytes = size_t{1} << 30; // modelled: 512 blocks of 2 MiB

class SimServeTest : public testing::Test {
protected:
  SimServeTest() : sys(cfg) {}

  static void SetUpTestSuite() {
    dir_ = new test::temp_dir{"tessera-sim-serve"};
    auto shape = engine::model_shape("llama3-8b");
    ASSERT_TRUE(shape);
    ASSERT_FALSE(engine::write_model_config(model(), *shape));
    ASSERT_FALSE(engine::write_demo_tokenizer(model(), shape->vocab_size));
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::filesystem::path model() { return dir_->path() / "llama3-8b"; }

  std::unique_ptr<serve_node> start(const std::string& mode) {
    serve_options o;
    o.model_dir = model();
    o.model_name = "llama3-8b";
    o.mode = mode;
    o.port = 0;
    o.kv_cache_bytes = kv_cache_bytes;
    o.engine = sim_choice();
    o.router.options.max_local_prefill_tokens = 0; // every prompt prefills remotely
    auto n = serve_node::start(sys, o);
    EXPECT_TRUE(n) << error_text(n.error());
    return n ? std::move(*n) : nullptr;
  }

  // One sim engine with the folder's tokenizer: the reference.
  static test::served_output alone(const std::vector<int32_t>& prompt, int max_tokens) {
    auto files = engine::load_model_files(model(), engine::backend_kind::sim);
    EXPECT_TRUE(files);
    engine::backend_options bo;
    bo.choice = sim_choice();
    bo.choice.sim.time_scale = 0;
    bo.kv_cache_bytes = kv_cache_bytes;
    auto be = engine::make_backend(*files, bo);
    EXPECT_TRUE(be);
    engine::engine eng{std::move(*be), {}, files->tokenizer};
    engine::request r;
    r.id = 1;
    r.prompt = prompt;
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0;
    r.params.logprobs = 0;
    EXPECT_FALSE(eng.add_request(r));
    test::served_output s;
    while (eng.has_unfinished())
      for (const auto& out : eng.step()) {
        s.text += out.text;
        for (const auto& lp : out.logprobs)
          s.logprobs.push_back(lp.logprob);
        if (out.finish != engine::finish_reason::none)
          s.finish = std::string{engine::to_string(out.finish)};
      }
    return s;
  }

  static test::temp_dir* dir_;
  caf::actor_system_config cfg;
  caf::actor_system sys;
};

test::temp_dir* SimServeTest::dir_ = nullptr;

TEST_F(SimServeTest, DisaggregatedSimClusterAnswersAsOneSimEngine) {
  auto node = start("disagg");
  ASSERT_TRUE(node);
  EXPECT_NE(node->description().find("sim h100"), std::string::npos) << node->description();
  std::mt19937_64 rng{5};
  for (int len : {7, 40, 200}) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < len; ++i)
      prompt.push_back(static_cast<int32_t>(8 + rng() % 100000));
    json body = {{"model", "llama3-8b"}, {"prompt", prompt}, {"max_tokens", 12},
                 {"temperature", 0},     {"logprobs", 0}};
    auto reply = test::http_post_json(node->url() + "/v1/completions", body.dump());
    ASSERT_EQ(reply.status, 200) << reply.body;
    auto got = test::from_completion(json::parse(reply.body));
    auto want = alone(prompt, 12);
    ASSERT_EQ(want.logprobs.size(), 12u);
    EXPECT_EQ(got, want) << len;
    EXPECT_EQ(got.finish, "length");
  }
  // The KV moved is the scaled payload: ceil(len / 16) = 1 + 3 + 13 blocks
  // of 2 MiB / 256 bytes each.
  auto metrics = test::http_get(node->url() + "/metrics").body;
  const std::string series = "tessera_kv_transfer_bytes_total{worker=\"prefill-0\"} ";
  auto at = metrics.find(series);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_DOUBLE_EQ(std::stod(metrics.substr(at + series.size())), 17.0 * (2 << 20) / 256);
  // Text in, text out, through the chat template too.
  json chat = {{"model", "llama3-8b"},
               {"messages", json::array({{{"role", "user"}, {"content", "Hello there"}}})},
               {"max_tokens", 8}};
  auto reply = test::http_post_json(node->url() + "/v1/chat/completions", chat.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto j = json::parse(reply.body);
  EXPECT_FALSE(j["choices"][0]["message"]["content"].get<std::string>().empty()) << reply.body;
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
}

} // namespace
} // namespace tessera::actors
