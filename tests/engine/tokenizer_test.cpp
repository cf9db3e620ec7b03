#include "engine/tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sentencepiece_trainer.h>

#include "common/error.hpp"
#include "engine/bpe_tokenizer.hpp"
#include "engine/demo_corpus.hpp"
#include "engine/detokenizer.hpp"
#include "engine/engine_errc.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer_builder.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::engine;
using tessera::test::temp_dir;
using json = nlohmann::json;

void write_text(const std::filesystem::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

const std::vector<std::string>& unicode_samples() {
  static const std::vector<std::string> samples = {
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\nand\n\n\nblank lines",
    "Café, naïve, façade, Ærøskøbing, Straße",
    "日本語のテキストと中文字符",
    "emoji 🙂🚀👍🏽 and flags 🇫🇷",
    "digits 0 12 345 6789 3.14159 1,000,000",
    "mixed: αβγ Привет مرحبا שלום 🙂 ok",
    "punctuation!?... \"quotes\" 'single' (parens) [brackets] {braces}",
    "it's we're they've I'm you'll he'd IT'S",
    "",
  };
  return samples;
}

/// A demo tokenizer of `vocab` ids, written once per size.
const tokenizer& demo(int32_t vocab) {
  static std::map<int32_t, std::pair<std::unique_ptr<temp_dir>, std::unique_ptr<tokenizer>>> cache;
  auto& slot = cache[vocab];
  if (!slot.second) {
    slot.first = std::make_unique<temp_dir>();
    auto err = write_demo_tokenizer(slot.first->path(), vocab);
    EXPECT_FALSE(err) << tessera::error_text(err);
    auto tok = load_tokenizer(slot.first->path(), model_config{});
    EXPECT_TRUE(tok) << tessera::error_text(tok.error());
    slot.second = std::move(*tok);
  }
  return *slot.second;
}

// --- Byte-level BPE on the demo tokenizer ---------------------------------

TEST(TokenizerTest, DemoTokenizerRoundTripsUnicodeText) {
  for (int32_t vocab : {512, 32000}) {
    const auto& tok = demo(vocab);
    for (const auto& s : unicode_samples()) {
      auto ids = tok.encode(s);
      EXPECT_EQ(tok.decode(ids), s) << "vocab " << vocab;
      for (auto id : ids) {
        EXPECT_GE(id, demo_special_ids::first_byte_token);
        EXPECT_LT(id, vocab);
      }
    }
  }
}

TEST(TokenizerTest, MergesMakeCommonWordsShorterThanTheirBytes) {
  const auto& tok = demo(512);
  EXPECT_LT(tok.encode("the").size(), 3u);
  EXPECT_EQ(tok.encode(" the").size(), 1u);
  auto text = std::string{"The harbour town woke slowly on the first morning."};
  EXPECT_LT(tok.encode(text).size(), text.size() / 2);
  // A bigger vocabulary never needs more tokens for corpus-like text.
  EXPECT_LE(demo(32000).encode(text).size(), tok.encode(text).size());
}

TEST(TokenizerTest, Llama3PreTokenizerSplitsLikeTheReference) {
  temp_dir dir;
  ASSERT_FALSE(write_demo_tokenizer(dir.path(), 512));
  auto tok = bpe_tokenizer::load(dir.path() / "tokenizer.json");
  ASSERT_TRUE(tok) << tessera::error_text(tok.error());
  using pieces = std::vector<std::string>;
  EXPECT_EQ((*tok)->pre_tokenize("Hello world's 12345 !!"),
            (pieces{"Hello", " world", "'s", " ", "123", "45", " !!"}));
  EXPECT_EQ((*tok)->pre_tokenize("I'M here\n\n  x"),
            (pieces{"I", "'M", " here", "\n\n", " ", " x"}));
  EXPECT_EQ((*tok)->pre_tokenize("a1b 2023-10-05"),
            (pieces{"a", "1", "b", " ", "202", "3", "-", "10", "-", "05"}));
  EXPECT_EQ((*tok)->pre_tokenize("(héllo) 世界!"), (pieces{"(héllo", ")", " 世界", "!"}));
  EXPECT_EQ((*tok)->pre_tokenize("end.\n"), (pieces{"end", ".\n"}));
}

TEST(TokenizerTest, SpecialTokensAreParsedOnlyWhenAsked) {
  const auto& tok = demo(512);
  auto text = std::string{"<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"};
  auto ids = tok.encode(text, false, true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), demo_special_ids::start_header);
  EXPECT_EQ(ids.back(), demo_special_ids::eot);
  EXPECT_NE(std::find(ids.begin(), ids.end(), demo_special_ids::end_header), ids.end());
  EXPECT_EQ(tok.decode(ids, false), text);
  EXPECT_EQ(tok.decode(ids, true), "user\n\nhi");

  auto plain = tok.encode(text, false, false);
  for (auto id : plain)
    EXPECT_FALSE(tok.is_special(id)) << id;
  EXPECT_EQ(tok.decode(plain), text);
}

TEST(TokenizerTest, BosIsPrependedWhenAsked) {
  const auto& tok = demo(512);
  auto with = tok.encode("hello", true);
  auto without = tok.encode("hello", false);
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with.front(), demo_special_ids::begin_of_text);
  EXPECT_TRUE(std::equal(without.begin(), without.end(), with.begin() + 1));
  EXPECT_EQ(tok.encode("", true), std::vector<int32_t>{demo_special_ids::begin_of_text});
}

TEST(TokenizerTest, TokenStringsAndIdsMapBothWays) {
  const auto& tok = demo(512);
  EXPECT_EQ(tok.token_to_id("<|eot_id|>"), demo_special_ids::eot);
  EXPECT_EQ(tok.token_to_id("Ġ"), demo_special_ids::first_byte_token + ' ');
  EXPECT_EQ(tok.token_to_id("A"), demo_special_ids::first_byte_token + 'A');
  EXPECT_EQ(tok.token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(tok.id_to_token(demo_special_ids::first_byte_token + '\n'), "Ċ");
  EXPECT_EQ(tok.id_to_token(-1), "");
  EXPECT_EQ(tok.id_to_token(512), "");
  EXPECT_EQ(tok.token_bytes(512), "");
  auto the = tok.token_to_id("Ġthe");
  ASSERT_TRUE(the);
  EXPECT_EQ(tok.token_bytes(*the), " the");
  EXPECT_EQ(tok.encode(" the"), std::vector<int32_t>{*the});
}

TEST(TokenizerTest, InvalidUtf8InputIsEncodedAsReplacementCharacters) {
  const auto& tok = demo(512);
  auto ids = tok.encode("ab\xFF" "cd\xE4\xB8");
  EXPECT_EQ(tok.decode(ids), "ab\xEF\xBF\xBD" "cd\xEF\xBF\xBD");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{demo_special_ids::first_byte_token + 0xE4, 99999, -5}),
            "\xEF\xBF\xBD");
}

// --- A hand-written tokenizer.json ------------------------------------------

json tiny_tokenizer_json() {
  return json::parse(R"({
    "version": "1.0",
    "added_tokens": [
      {"id": 15, "content": "<|end|>", "special": true},
      {"id": 16, "content": "[note]", "special": false}
    ],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {
      "type": "BPE",
      "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7,
                "he": 8, "ll": 9, "llo": 10, "hello": 11, "Ġw": 12, "or": 13,
                "Ġwor": 14, "Ġworld": 17},
      "merges": ["h e", "l l", "ll o", "he llo", "Ġ w", "o r", "Ġw or"]
    }
  })");
}

std::unique_ptr<tokenizer> load_json(const temp_dir& dir, const json& j) {
  write_text(dir.path() / "tokenizer.json", j.dump());
  auto tok = load_tokenizer(dir.path(), model_config{});
  EXPECT_TRUE(tok) << tessera::error_text(tok.error());
  return tok ? std::move(*tok) : nullptr;
}

TEST(TokenizerTest, HandWrittenTokenizerEncodesToExactIds) {
  temp_dir dir;
  auto tok = load_json(dir, tiny_tokenizer_json());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 18);
  // "hello" merges fully; " world" stops at "Ġwor" + "l" + "d".
  EXPECT_EQ(tok->encode("hello world"), (std::vector<int32_t>{11, 14, 2, 7}));
  EXPECT_EQ(tok->encode("hello<|end|>[note]"), (std::vector<int32_t>{11, 15, 16}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{11, 14, 2, 7, 15}), "hello world");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{11, 15, 16}, false), "hello<|end|>[note]");
  EXPECT_TRUE(tok->is_special(15));
  EXPECT_FALSE(tok->is_special(16));
  // Without parse_special the special token's bytes are plain text; the
  // non-special added token still matches.
  auto plain = tok->encode("<|end|>[note]", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 15), 0);
  EXPECT_EQ(plain.back(), 16);
}

TEST(TokenizerTest, ArrayFormMergesEncodeLikeStringForm) {
  temp_dir dir;
  auto j = tiny_tokenizer_json();
  json merges = json::array();
  for (const auto& m : j["model"]["merges"]) {
    auto s = m.get<std::string>();
    auto sp = s.find(' ');
    merges.push_back({s.substr(0, sp), s.substr(sp + 1)});
  }
  j["model"]["merges"] = merges;
  auto tok = load_json(dir, j);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("hello world"), (std::vector<int32_t>{11, 14, 2, 7}));
}

TEST(TokenizerTest, IgnoreMergesTakesWholeWordsFromTheVocab) {
  temp_dir dir;
  auto j = tiny_tokenizer_json();
  j["model"]["ignore_merges"] = true;
  auto tok = load_json(dir, j);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("hello world"), (std::vector<int32_t>{11, 17}));
}

TEST(TokenizerTest, AcceptsNfcNormalizerAndLiteralSplitPatterns) {
  temp_dir dir;
  auto j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {
    {"type", "Sequence"},
    {"pretokenizers", json::array({{{"type", "Split"},
                                    {"pattern", {{"String", " "}}},
                                    {"behavior", "Isolated"},
                                    {"invert", false}},
                                   {{"type", "ByteLevel"},
                                    {"add_prefix_space", false},
                                    {"use_regex", false}}})}};
  auto tok = load_json(dir, j);
  ASSERT_TRUE(tok);
  // The space is its own piece, so "Ġw" can never form.
  EXPECT_EQ(tok->encode("hello world"), (std::vector<int32_t>{11, 4, 5, 13, 2, 7}));
}

TEST(TokenizerTest, SettingsComeFromTheModelFolderFiles) {
  temp_dir dir;
  auto j = tiny_tokenizer_json();
  j["added_tokens"].push_back({{"id", 18}, {"content", "<s>"}, {"special", true}});
  j["added_tokens"].push_back({{"id", 19}, {"content", "</s>"}, {"special", true}});
  write_text(dir.path() / "tokenizer.json", j.dump());
  write_text(dir.path() / "generation_config.json", R"({"eos_token_id": [15, 19]})");
  write_text(dir.path() / "tokenizer_config.json", R"({
    "bos_token": {"content": "<s>", "lstrip": false},
    "eos_token": "</s>",
    "add_bos_token": false,
    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]
  })");
  model_config cfg;
  cfg.eos_token_ids = {1};
  auto tok = load_tokenizer(dir.path(), cfg);
  ASSERT_TRUE(tok) << tessera::error_text(tok.error());
  const auto& s = (*tok)->settings();
  EXPECT_EQ(s.bos_id, 18);
  EXPECT_EQ(s.eos_ids, (std::vector<int32_t>{1, 15, 19}));
  EXPECT_FALSE(s.add_bos);
  EXPECT_EQ(s.chat_template, "D");
  EXPECT_EQ((*tok)->encode("hello", true).front(), 18);
}

TEST(TokenizerTest, MalformedSettingsFilesAreNamedInErrors) {
  struct bad_case {
    const char* file;
    const char* text;
    const char* phrase;
  };
  const bad_case cases[] = {
    {"generation_config.json", "{\"eos_token_id\": ", "not valid JSON"},
    {"generation_config.json", R"({"eos_token_id": ["x"]})", "'eos_token_id'"},
    {"generation_config.json", R"({"bos_token_id": -3})", "'bos_token_id'"},
    {"tokenizer_config.json", R"({"bos_token": "<nope>"})", "is not a token"},
    {"tokenizer_config.json", R"({"eos_token": 7})", "'eos_token'"},
    {"tokenizer_config.json", R"({"add_bos_token": "yes"})", "'add_bos_token'"},
    {"tokenizer_config.json", R"({"chat_template": 5})", "'chat_template'"},
    {"tokenizer_config.json", "[1, 2]", "not a JSON object"},
  };
  for (const auto& c : cases) {
    temp_dir dir;
    write_text(dir.path() / "tokenizer.json", tiny_tokenizer_json().dump());
    write_text(dir.path() / c.file, c.text);
    auto tok = load_tokenizer(dir.path(), model_config{});
    ASSERT_FALSE(tok) << c.text;
    auto msg = tessera::error_message(tok.error());
    EXPECT_TRUE(tok.error() == engine_errc::bad_config) << msg;
    EXPECT_NE(msg.find(c.file), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.phrase), std::string::npos) << msg;
  }
}

TEST(TokenizerTest, MalformedTokenizerJsonIsRejectedWithAReason) {
  struct bad_case {
    std::function<void(json&)> edit;
    std::string raw; // used instead of the edited JSON when not empty
    const char* phrase;
  };
  auto base = tiny_tokenizer_json();
  const std::vector<bad_case> cases = {
    {nullptr, "{\"model\": {\"vocab\": ", "not valid JSON"},
    {nullptr, "[]", "not a JSON object"},
    {[](json& j) { j.erase("model"); }, "", "missing 'model'"},
    {[](json& j) { j["model"]["type"] = "WordPiece"; }, "", "unsupported model type 'WordPiece'"},
    {[](json& j) { j["model"].erase("vocab"); }, "", "missing 'model.vocab'"},
    {[](json& j) { j["model"].erase("merges"); }, "", "missing 'model.merges'"},
    {[](json& j) { j["model"]["vocab"]["x"] = "7"; }, "", "'x' has a non-integer id"},
    {[](json& j) { j["model"]["vocab"]["x"] = 3; }, "", "duplicate id 3"},
    {[](json& j) { j["model"]["vocab"]["x"] = -1; }, "", "out of range"},
    {[](json& j) { j["model"]["merges"].push_back("h q"); }, "", "'q' is not in the vocab"},
    {[](json& j) { j["model"]["merges"].push_back("w r"); }, "", "merged token 'wr' is not in the vocab"},
    {[](json& j) { j["model"]["merges"].push_back("hel"); }, "", "not two tokens"},
    {[](json& j) { j["model"]["merges"].push_back(json::array({"h"})); }, "", "neither"},
    {[](json& j) { j["model"]["byte_fallback"] = true; }, "", "byte_fallback"},
    {[](json& j) { j["added_tokens"] = 5; }, "", "'added_tokens' is not an array"},
    {[](json& j) { j["added_tokens"].push_back({{"id", 2}, {"content", "<x>"}}); }, "", "reuses id 2"},
    {[](json& j) { j["added_tokens"].push_back({{"content", "<x>"}}); }, "", "lacks an integer 'id'"},
    {[](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, "", "unsupported normalizer 'Lowercase'"},
    {[](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }, "", "unsupported pre_tokenizer 'Metaspace'"},
    {[](json& j) { j["pre_tokenizer"] = nullptr; }, "", "no ByteLevel"},
    {[](json& j) {
       j["pre_tokenizer"] = {{"type", "Sequence"},
                             {"pretokenizers", json::array({{{"type", "Split"},
                                                             {"pattern", {{"Regex", "(unclosed"}}},
                                                             {"behavior", "Isolated"}},
                                                            {{"type", "ByteLevel"}}})}};
     },
     "", "Split pattern: bad regex"},
    {[](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, "", "unsupported decoder 'WordPiece'"},
    {[](json& j) { j["model"]["ignore_merges"] = "yes"; }, "", "'ignore_merges' is not a boolean"},
  };
  for (const auto& c : cases) {
    temp_dir dir;
    std::string text = c.raw;
    if (text.empty()) {
      auto j = base;
      c.edit(j);
      text = j.dump();
    }
    write_text(dir.path() / "tokenizer.json", text);
    auto tok = load_tokenizer(dir.path(), model_config{});
    ASSERT_FALSE(tok) << c.phrase;
    auto msg = tessera::error_message(tok.error());
    EXPECT_TRUE(tok.error() == engine_errc::bad_tokenizer) << msg;
    EXPECT_NE(msg.find((dir.path() / "tokenizer.json").string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.phrase), std::string::npos) << "want '" << c.phrase << "' in: " << msg;
  }
}

TEST(TokenizerTest, FolderWithoutTokenizerIsAClearError) {
  temp_dir dir;
  auto tok = load_tokenizer(dir.path(), model_config{});
  ASSERT_FALSE(tok);
  auto msg = tessera::error_message(tok.error());
  EXPECT_NE(msg.find("no tokenizer.json or tokenizer.model"), std::string::npos) << msg;
}

// --- Sentencepiece ----------------------------------------------------------

/// A byte-fallback BPE sentencepiece model trained on the demo corpus, as
/// Llama 2's is configured (dummy prefix, whitespace kept).
class SentencepieceTokenizerTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("tessera-sp");
    auto corpus = dir_->path() / "corpus.txt";
    write_text(corpus, demo_corpus());
    auto args = "--input=" + corpus.string() + " --model_prefix=" +
                (dir_->path() / "tokenizer").string() +
                " --vocab_size=400 --model_type=bpe --byte_fallback=true"
                " --character_coverage=1.0 --normalization_rule_name=identity"
                " --remove_extra_whitespaces=false --add_dummy_prefix=true"
                " --minloglevel=2";
    auto st = sentencepiece::SentencePieceTrainer::Train(args);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::filesystem::remove(corpus);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::unique_ptr<tokenizer> load() {
    auto tok = load_tokenizer(dir_->path(), model_config{});
    EXPECT_TRUE(tok) << tessera::error_text(tok.error());
    return tok ? std::move(*tok) : nullptr;
  }

  static inline temp_dir* dir_ = nullptr;
};

TEST_F(SentencepieceTokenizerTest, RoundTripsTextIncludingUnseenCharacters) {
  auto tok = load();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 400);
  for (const auto& s : unicode_samples()) {
    if (s.starts_with(" "))
      continue; // covered by LeadingSpaceIsKeptOnlyWhenTyped
    auto ids = tok->encode(s);
    EXPECT_EQ(tok->decode(ids), s);
  }
  // "世" is not in the training text: it is spelled with byte tokens.
  auto ids = tok->encode("世");
  ASSERT_GE(ids.size(), 3u);
  std::string bytes;
  for (auto id : ids)
    bytes += tok->token_bytes(id);
  EXPECT_EQ(bytes, " 世");
}

TEST_F(SentencepieceTokenizerTest, LeadingSpaceIsKeptOnlyWhenTyped) {
  auto tok = load();
  ASSERT_TRUE(tok);
  EXPECT_TRUE(tok->strips_leading_space());
  auto ids = tok->encode("Hello");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(tok->token_bytes(ids.front()).front(), ' '); // the dummy prefix
  EXPECT_EQ(tok->decode(ids), "Hello");
  EXPECT_EQ(tok->decode(tok->encode(" Hello")), " Hello");

  // Streaming agrees with decode, from the start and mid-sequence.
  incremental_detokenizer start{*tok, true, true};
  incremental_detokenizer middle{*tok, true, false};
  std::string a;
  std::string b;
  for (auto id : tok->encode("Hello there")) {
    a += start.push(id);
    b += middle.push(id);
  }
  a += start.finish();
  b += middle.finish();
  EXPECT_EQ(a, "Hello there");
  EXPECT_EQ(b, " Hello there");
}

TEST_F(SentencepieceTokenizerTest, ControlTokensAndBosComeFromTheModel) {
  auto tok = load();
  ASSERT_TRUE(tok);
  auto bos = tok->token_to_id("<s>");
  auto eos = tok->token_to_id("</s>");
  ASSERT_TRUE(bos && eos);
  EXPECT_EQ(tok->settings().bos_id, bos);
  EXPECT_EQ(tok->settings().eos_ids, std::vector<int32_t>{*eos});
  EXPECT_TRUE(tok->settings().add_bos);
  EXPECT_TRUE(tok->is_special(*bos));
  EXPECT_EQ(tok->encode("hi", true).front(), *bos);
  auto ids = tok->encode("hi</s>");
  EXPECT_EQ(ids.back(), *eos);
  auto plain = tok->encode("hi</s>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), *eos), 0);
  EXPECT_EQ(tok->decode(ids), "hi");
  EXPECT_EQ(tok->decode(ids, false), "hi</s>");
  EXPECT_EQ(tok->token_to_id("surely-not-a-piece"), std::nullopt);
  EXPECT_EQ(tok->id_to_token(*bos), "<s>");
}

TEST_F(SentencepieceTokenizerTest, CorruptModelFileIsRejectedWithItsName) {
  temp_dir dir;
  write_text(dir.path() / "tokenizer.model", "this is not a protobuf");
  auto tok = load_tokenizer(dir.path(), model_config{});
  ASSERT_FALSE(tok);
  EXPECT_TRUE(tok.error() == engine_errc::bad_tokenizer);
  auto msg = tessera::error_message(tok.error());
  EXPECT_NE(msg.find("tokenizer.model"), std::string::npos) << msg;
}

TEST_F(SentencepieceTokenizerTest, UnsupportedTokenizerJsonFallsBackToTheModel) {
  temp_dir dir;
  std::filesystem::copy_file(dir_->path() / "tokenizer.model", dir.path() / "tokenizer.model");
  auto j = tiny_tokenizer_json();
  j["model"]["byte_fallback"] = true; // a converted sentencepiece model
  write_text(dir.path() / "tokenizer.json", j.dump());
  auto tok = load_tokenizer(dir.path(), model_config{});
  ASSERT_TRUE(tok) << tessera::error_text(tok.error());
  EXPECT_TRUE((*tok)->strips_leading_space());
  EXPECT_EQ((*tok)->vocab_size(), 400);
}

} // namespace
