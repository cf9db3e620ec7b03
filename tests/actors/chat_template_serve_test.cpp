// The serve start path with the model's chat template: a template that
// cannot render stops the start with an error naming the construct; the
// model's own template is served through the Jinja interpreter with
// message content kept out of the control tokens.

#include "actors/node/serve_node.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tests/support/curl.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace tessera::actors {
namespace {

using nlohmann::json;

class ChatTemplateServeTest : public ::testing::Test {
protected:
  ChatTemplateServeTest() : sys(cfg) {}

  /// The nano test model with `chat_template` in its tokenizer_config.json.
  std::filesystem::path model_with_template(const std::string& chat_template) {
    auto dir = tmp.path() / "model";
    std::filesystem::copy(tessera::test::test_model_dir("nano"), dir,
                          std::filesystem::copy_options::recursive);
    json tc = json::parse(std::ifstream(dir / "tokenizer_config.json"));
    tc["chat_template"] = chat_template;
    std::ofstream(dir / "tokenizer_config.json") << tc.dump();
    return dir;
  }

  caf::expected<std::unique_ptr<serve_node>> start(const std::filesystem::path& model) {
    serve_options o;
    o.model_dir = model;
    o.model_name = "nano";
    o.mode = "agg";
    o.port = 0;
    o.threads_per_worker = 1;
    o.kv_cache_bytes = size_t{8} << 20;
    return serve_node::start(sys, o);
  }

  tessera::test::temp_dir tmp;
  caf::actor_system_config cfg;
  caf::actor_system sys;
};

TEST_F(ChatTemplateServeTest, ATemplateThatCannotRenderStopsTheStartNamingTheConstruct) {
  auto n = start(model_with_template(
    "{% for m in messages %}\n{{ m.content | wordwrap(20) }}{% endfor %}"));
  ASSERT_FALSE(n) << "started with a template it cannot render";
  auto text = error_text(n.error());
  EXPECT_NE(text.find("unsupported filter 'wordwrap'"), std::string::npos) << text;
  EXPECT_NE(text.find("line 2"), std::string::npos) << text;
}

TEST_F(ChatTemplateServeTest, TheModelsTemplateServesChat) {
  auto n = start(model_with_template(
    "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"));
  ASSERT_TRUE(n) << error_text(n.error());
  json chat = {{"model", "nano"},
               {"messages", {{{"role", "user"}, {"content", "hi <|eot_id|> there"}}}},
               {"max_tokens", 2}};
  auto reply = tessera::test::http_post_json((*n)->url() + "/v1/chat/completions", chat.dump());
  EXPECT_EQ(reply.status, 200) << reply.body;
}

} // namespace
} // namespace tessera::actors
