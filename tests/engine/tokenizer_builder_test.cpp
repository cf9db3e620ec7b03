#include "engine/tokenizer_builder.hpp"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/byte_level.hpp"
#include "engine/engine_errc.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::engine;
using tessera::test::temp_dir;

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json(const std::filesystem::path& p) {
  return nlohmann::json::parse(read_all(p));
}

std::unique_ptr<tokenizer> load(const std::filesystem::path& dir) {
  auto tok = load_tokenizer(dir, model_config{});
  EXPECT_TRUE(tok) << tessera::error_text(tok.error());
  return tok ? std::move(*tok) : nullptr;
}

TEST(TokenizerBuilderTest, VocabularyHasExactlyTheRequestedSize) {
  for (int32_t n : {demo_tokenizer_min_vocab, 512, 32000, 128256}) {
    temp_dir dir;
    ASSERT_FALSE(write_demo_tokenizer(dir.path(), n)) << n;
    auto j = read_json(dir.path() / "tokenizer.json");
    EXPECT_EQ(j["model"]["vocab"].size(), static_cast<size_t>(n));
    EXPECT_GE(j["model"]["merges"].size(), static_cast<size_t>(n - demo_special_ids::first_merge));
    auto tok = load(dir.path());
    ASSERT_TRUE(tok);
    EXPECT_EQ(tok->vocab_size(), n);
    EXPECT_EQ(tok->id_to_token(n - 1).empty(), false);
  }
}

TEST(TokenizerBuilderTest, SpecialAndByteTokensSitAtTheDocumentedIds) {
  temp_dir dir;
  ASSERT_FALSE(write_demo_tokenizer(dir.path(), 512));
  auto tok = load(dir.path());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->token_to_id("<|begin_of_text|>"), demo_special_ids::begin_of_text);
  EXPECT_EQ(tok->token_to_id("<|end_of_text|>"), demo_special_ids::end_of_text);
  EXPECT_EQ(tok->token_to_id("<|start_header_id|>"), demo_special_ids::start_header);
  EXPECT_EQ(tok->token_to_id("<|end_header_id|>"), demo_special_ids::end_header);
  EXPECT_EQ(tok->token_to_id("<|eot_id|>"), demo_special_ids::eot);
  EXPECT_EQ(tok->token_to_id("<|reserved_special_token_2|>"), 7);
  for (int32_t id = 0; id < demo_special_ids::first_byte_token; ++id)
    EXPECT_TRUE(tok->is_special(id)) << id;
  for (int b = 0; b < 256; ++b) {
    int32_t id = demo_special_ids::first_byte_token + b;
    EXPECT_EQ(tok->id_to_token(id), byte_level_chars()[b]) << b;
    EXPECT_EQ(tok->token_bytes(id), std::string(1, static_cast<char>(b))) << b;
    EXPECT_FALSE(tok->is_special(id));
  }
}

TEST(TokenizerBuilderTest, EveryMergeBuildsALaterTokenFromEarlierOnes) {
  temp_dir dir;
  ASSERT_FALSE(write_demo_tokenizer(dir.path(), 32000));
  auto j = read_json(dir.path() / "tokenizer.json");
  const auto& vocab = j["model"]["vocab"];
  for (const auto& m : j["model"]["merges"]) {
    auto s = m.get<std::string>();
    auto space = s.find(' ');
    ASSERT_NE(space, std::string::npos) << s;
    auto left = s.substr(0, space);
    auto right = s.substr(space + 1);
    ASSERT_TRUE(vocab.contains(left) && vocab.contains(right) && vocab.contains(left + right)) << s;
    auto result = vocab[left + right].get<int32_t>();
    EXPECT_GE(result, demo_special_ids::first_merge) << s;
    EXPECT_LT(vocab[left].get<int32_t>(), result) << s;
    EXPECT_LT(vocab[right].get<int32_t>(), result) << s;
  }
}

TEST(TokenizerBuilderTest, WritingTwiceGivesIdenticalFiles) {
  temp_dir a;
  temp_dir b;
  ASSERT_FALSE(write_demo_tokenizer(a.path(), 32000));
  ASSERT_FALSE(write_demo_tokenizer(b.path(), 32000));
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    auto x = read_all(a.path() / f);
    EXPECT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == read_all(b.path() / f)) << f;
  }
}

TEST(TokenizerBuilderTest, LoadsWithLlama3ChatSettings) {
  temp_dir dir;
  ASSERT_FALSE(write_demo_tokenizer(dir.path(), 1000));
  auto tok = load(dir.path());
  ASSERT_TRUE(tok);
  const auto& s = tok->settings();
  EXPECT_EQ(s.bos_id, demo_special_ids::begin_of_text);
  EXPECT_EQ(s.eos_ids, std::vector<int32_t>{demo_special_ids::eot});
  EXPECT_TRUE(s.add_bos);
  EXPECT_NE(s.chat_template.find("<|start_header_id|>"), std::string::npos);
  EXPECT_NE(s.chat_template.find("add_generation_prompt"), std::string::npos);
  EXPECT_EQ(tok->encode("hi", true).front(), demo_special_ids::begin_of_text);
}

TEST(TokenizerBuilderTest, LearntMergesCoverCommonWords) {
  temp_dir dir;
  ASSERT_FALSE(write_demo_tokenizer(dir.path(), demo_tokenizer_min_vocab));
  auto tok = load(dir.path());
  ASSERT_TRUE(tok);
  // Even the smallest vocabulary learns " the", the corpus' commonest word.
  EXPECT_EQ(tok->encode(" the").size(), 1u);
}

TEST(TokenizerBuilderTest, RejectsAVocabularyBelowTheMinimum) {
  temp_dir dir;
  auto err = write_demo_tokenizer(dir.path(), demo_tokenizer_min_vocab - 1);
  ASSERT_TRUE(err);
  EXPECT_TRUE(err == engine_errc::bad_config);
  EXPECT_NE(tessera::error_message(err).find("vocab_size 299"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "tokenizer.json"));
}

TEST(TokenizerBuilderTest, ReportsAFolderItCannotCreate) {
  temp_dir dir;
  std::ofstream(dir.path() / "file") << "x";
  auto err = write_demo_tokenizer(dir.path() / "file" / "sub", 512);
  ASSERT_TRUE(err);
  EXPECT_TRUE(err == engine_errc::io_error);
  EXPECT_NE(tessera::error_message(err).find("file/sub"), std::string::npos);
}

} // namespace
