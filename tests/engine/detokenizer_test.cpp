#include "engine/detokenizer.hpp"

#include <random>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer_builder.hpp"
#include "engine/utf8.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::engine;
using tessera::test::temp_dir;

constexpr std::string_view fffd = "\xEF\xBF\xBD";

/// The demo tokenizer (vocab 512), written once.
const tokenizer& demo() {
  static temp_dir dir;
  static std::unique_ptr<tokenizer> tok = [] {
    auto err = write_demo_tokenizer(dir.path(), 512);
    EXPECT_FALSE(err) << tessera::error_text(err);
    auto t = load_tokenizer(dir.path(), model_config{});
    EXPECT_TRUE(t) << tessera::error_text(t.error());
    return std::move(*t);
  }();
  return *tok;
}

/// One single-byte token per byte of `bytes`.
std::vector<int32_t> byte_ids(std::string_view bytes) {
  std::vector<int32_t> ids;
  for (char c : bytes)
    ids.push_back(demo_special_ids::first_byte_token + static_cast<uint8_t>(c));
  return ids;
}

/// Pushes every id, checking each chunk is whole UTF-8; returns all text.
std::string stream(incremental_detokenizer& d, const std::vector<int32_t>& ids) {
  std::string all;
  for (auto id : ids) {
    auto chunk = d.push(id);
    EXPECT_TRUE(utf8_is_valid(chunk)) << "partial character emitted after id " << id;
    EXPECT_LE(d.pending_bytes(), 3u);
    all += chunk;
  }
  auto tail = d.finish();
  EXPECT_TRUE(utf8_is_valid(tail));
  EXPECT_EQ(d.pending_bytes(), 0u);
  return all + tail;
}

TEST(DetokenizerTest, MultiByteCharactersSplitAcrossTokensAreNeverEmittedHalfway) {
  const std::string text = "héllo 世界 🙂";
  auto ids = byte_ids(text);
  incremental_detokenizer d{demo()};
  std::vector<std::string> chunks;
  for (auto id : ids)
    chunks.push_back(d.push(id));
  EXPECT_EQ(d.finish(), "");
  std::string all;
  for (const auto& c : chunks) {
    EXPECT_TRUE(utf8_is_valid(c));
    all += c;
  }
  EXPECT_EQ(all, text);
  EXPECT_EQ(demo().decode(ids), text);
  // "é" is 2 bytes: nothing after its first byte, the whole char after its second.
  EXPECT_EQ(chunks[1], "");
  EXPECT_EQ(chunks[2], "é");
  // 🙂 is 4 bytes at the end: only the last push releases it.
  EXPECT_EQ(chunks[chunks.size() - 2], "");
  EXPECT_EQ(chunks.back(), "🙂");
}

TEST(DetokenizerTest, InvalidBytesBecomeReplacementCharactersWithoutStalling) {
  incremental_detokenizer d{demo()};
  // A byte that can never start a character is replaced at once.
  EXPECT_EQ(d.push(byte_ids("\xFF")[0]), fffd);
  EXPECT_EQ(d.push(byte_ids("a")[0]), "a");
  // A started 3-byte character broken by an ASCII byte: one U+FFFD, then it.
  EXPECT_EQ(d.push(byte_ids("\xE4")[0]), "");
  EXPECT_EQ(d.push(byte_ids("\xB8")[0]), "");
  EXPECT_EQ(d.push(byte_ids("b")[0]), std::string{fffd} + "b");
  // A stray continuation byte, an overlong lead and a surrogate.
  EXPECT_EQ(d.push(byte_ids("\x80")[0]), fffd);
  EXPECT_EQ(d.push(byte_ids("\xC0")[0]), fffd);
  EXPECT_EQ(d.push(byte_ids("\xED")[0]), "");
  EXPECT_EQ(d.push(byte_ids("\xA0")[0]), std::string{fffd} + std::string{fffd});
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(DetokenizerTest, RandomByteSoupMatchesDecodeAndHoldsAtMostThreeBytes) {
  std::mt19937 rng{1234};
  std::uniform_int_distribution<int> byte{0, 255};
  std::vector<int32_t> ids;
  for (int i = 0; i < 4000; ++i)
    ids.push_back(demo_special_ids::first_byte_token + byte(rng));
  incremental_detokenizer d{demo()};
  auto all = stream(d, ids);
  EXPECT_EQ(all, demo().decode(ids));
  EXPECT_NE(all.find(fffd), std::string::npos);
}

TEST(DetokenizerTest, RandomTokenIdsMatchDecode) {
  std::mt19937 rng{99};
  std::uniform_int_distribution<int32_t> any{0, demo().vocab_size() - 1};
  for (bool skip : {true, false}) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 3000; ++i)
      ids.push_back(any(rng));
    incremental_detokenizer d{demo(), skip};
    EXPECT_EQ(stream(d, ids), demo().decode(ids, skip));
  }
}

TEST(DetokenizerTest, FinishFlushesAnIncompleteCharacter) {
  incremental_detokenizer d{demo()};
  EXPECT_EQ(d.push(byte_ids("x")[0]), "x");
  EXPECT_EQ(d.push(byte_ids("\xF0")[0]), "");
  EXPECT_EQ(d.push(byte_ids("\x9F")[0]), "");
  EXPECT_EQ(d.pending_bytes(), 2u);
  EXPECT_EQ(d.finish(), fffd);
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.finish(), "");
  EXPECT_EQ(d.push(byte_ids("y")[0]), "y");
}

TEST(DetokenizerTest, EncodedTextStreamsBackExactly) {
  const std::string text = "Streaming: naïve café, 日本語, emoji 🙂🚀 and\nnew lines.";
  auto ids = demo().encode(text, true);
  incremental_detokenizer d{demo(), true, true};
  EXPECT_EQ(stream(d, ids), text);
}

TEST(DetokenizerTest, SpecialTokensAreSkippedUnlessAsked) {
  auto eot = demo_special_ids::eot;
  incremental_detokenizer skipping{demo()};
  EXPECT_EQ(skipping.push(eot), "");
  incremental_detokenizer keeping{demo(), false};
  EXPECT_EQ(keeping.push(eot), "<|eot_id|>");
  EXPECT_EQ(keeping.push(-1), "");
  EXPECT_EQ(keeping.push(1 << 20), "");
}

/// A sentencepiece-like tokenizer: id i is the i-th piece, with a dummy
/// prefix space on the first.
class fake_sp_tokenizer final : public tokenizer {
public:
  std::vector<int32_t> encode(std::string_view, bool, bool) const override { return {}; }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string s;
    for (auto id : ids)
      if (!(skip_special && is_special(id)))
        s += token_bytes(id);
    return s.starts_with(' ') ? s.substr(1) : s;
  }
  std::string token_bytes(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? pieces_[id] : std::string{};
  }
  bool strips_leading_space() const override { return true; }
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  std::string id_to_token(int32_t) const override { return {}; }
  bool is_special(int32_t id) const override { return id == 0; }

private:
  std::vector<std::string> pieces_ = {"<s>", " Hello", " world", " "};
};

TEST(DetokenizerTest, DropsOneLeadingSpaceOnlyAtSequenceStart) {
  fake_sp_tokenizer tok;
  std::vector<int32_t> ids = {0, 1, 2, 3, 1};
  incremental_detokenizer start{tok, true, true};
  EXPECT_EQ(stream(start, ids), "Hello world  Hello");
  EXPECT_EQ(tok.decode(ids, true), "Hello world  Hello");
  incremental_detokenizer middle{tok, true, false};
  EXPECT_EQ(stream(middle, ids), " Hello world  Hello");
}

} // namespace
