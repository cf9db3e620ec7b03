#pragma once
/// @file
/// Byte-level BPE from a Hugging Face tokenizer.json (GPT-2, Llama 3,
/// Qwen2). Supported: model BPE with "a b" or ["a", "b"] merges and
/// ignore_merges; pre_tokenizer ByteLevel (GPT-2 regex) or a Sequence of
/// Split(Regex|String, Isolated) followed by ByteLevel; normalizer none or
/// NFC (text is taken as already NFC: no normalization is applied);
/// decoder ByteLevel; added tokens, special or not. The post_processor is
/// ignored (BOS comes from tokenizer_settings).

#include <array>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <caf/expected.hpp>
#include <nlohmann/json_fwd.hpp>

#include "engine/added_token_matcher.hpp"
#include "engine/regex_splitter.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::engine {

/// Transparent string hash, for lookups by std::string_view.
struct string_hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

/// Byte-level BPE tokenizer. Immutable after loading; thread-safe.
class bpe_tokenizer final : public tokenizer {
public:
  /// Parses the text of a tokenizer.json. `source` names the file in
  /// errors (engine_errc::bad_tokenizer).
  [[nodiscard]] static caf::expected<std::unique_ptr<bpe_tokenizer>>
  parse(std::string_view json_text, std::string_view source);

  /// Reads and parses a tokenizer.json file.
  [[nodiscard]] static caf::expected<std::unique_ptr<bpe_tokenizer>>
  load(const std::filesystem::path& file);

  std::vector<int32_t> encode(std::string_view text, bool add_bos = false,
                              bool parse_special = true) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special = true) const override;
  std::string token_bytes(int32_t id) const override;
  bool strips_leading_space() const override { return false; }
  int32_t vocab_size() const override { return static_cast<int32_t>(tokens_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  bool is_special(int32_t id) const override;

  /// Sets the special tokens and chat template; called once while loading.
  void set_settings(tokenizer_settings s) { settings_ = std::move(s); }

  /// The pieces the pre-tokenizer cuts `text` into (raw bytes, before the
  /// byte-level mapping). For tests and diagnostics.
  [[nodiscard]] std::vector<std::string> pre_tokenize(std::string_view text) const;

private:
  /// One pre-tokenizer stage, applied to every piece of the previous one.
  struct split_step {
    /// Prepend " " to pieces that do not start with one (ByteLevel
    /// add_prefix_space), before splitting.
    bool prefix_space = false;
    /// Isolates the matches; none: the piece stays whole.
    std::optional<regex_splitter> splitter;
  };
  struct merge_entry {
    int32_t rank;
    int32_t result;
  };

  bpe_tokenizer() = default;

  // Parts of parse(); each returns an error naming `source`. They may throw
  // nlohmann::json::exception, which parse() turns into an error.
  [[nodiscard]] caf::error read_vocab(const nlohmann::json& root, const nlohmann::json& model,
                                      std::string_view source);
  [[nodiscard]] caf::error read_merges(const nlohmann::json& model, std::string_view source);
  [[nodiscard]] caf::error read_pipeline(const nlohmann::json& root, std::string_view source);

  void pre_tokenize_into(std::string_view text, std::vector<std::string_view>& pieces,
                         std::deque<std::string>& storage) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void merge_word(std::vector<int32_t>& symbols) const;

  // Vocabulary.
  std::vector<std::string> tokens_;      // [vocab_size] token text as stored
  std::vector<std::string> bytes_;       // [vocab_size] raw bytes of each token
  std::vector<uint8_t> special_;         // [vocab_size] 1 for special added tokens
  std::unordered_map<std::string, int32_t, string_hash, std::equal_to<>> ids_;
  std::array<int32_t, 256> byte_ids_{};  // id of each single-byte token, -1 if none
  std::unordered_map<uint64_t, merge_entry> merges_; // (left << 32 | right) -> merge
  std::optional<int32_t> unk_id_;
  bool ignore_merges_ = false;

  // Pre-tokenizer.
  std::vector<split_step> steps_;
  added_token_matcher added_;

  // Word cache: pre-token bytes -> ids. Guarded by cache_mutex_.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, string_hash, std::equal_to<>>
    cache_;
};

} // namespace tessera::engine
