#pragma once
/// @file
/// Sentencepiece tokenizer.model (Llama 2, Mistral, TinyLlama) through
/// libsentencepiece. Only sp_tokenizer.cpp includes sentencepiece headers.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "engine/added_token_matcher.hpp"
#include "engine/tokenizer.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
} // namespace sentencepiece

namespace tessera::engine {

/// A sentencepiece model. Immutable after loading; thread-safe
/// (SentencePieceProcessor's const methods are).
class sp_tokenizer final : public tokenizer {
public:
  /// Loads a tokenizer.model file. Errors (engine_errc::bad_tokenizer,
  /// io_error) name the file and carry sentencepiece's message.
  [[nodiscard]] static caf::expected<std::unique_ptr<sp_tokenizer>>
  load(const std::filesystem::path& file);

  ~sp_tokenizer() override;

  /// Control pieces ("<s>", "</s>") and "<unk>" in the text are matched as
  /// special tokens when `parse_special` is true; each text run between
  /// them is encoded on its own (and gets the dummy prefix).
  std::vector<int32_t> encode(std::string_view text, bool add_bos = false,
                              bool parse_special = true) const override;
  /// Concatenates token_bytes, drops the dummy-prefix space of the first
  /// piece and replaces ill-formed UTF-8 by U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special = true) const override;
  /// "▁" -> " ", "<0xAB>" -> byte 0xAB, control pieces -> their text,
  /// <unk> -> " ⁇ " (as sentencepiece decodes it).
  std::string token_bytes(int32_t id) const override;
  bool strips_leading_space() const override { return strips_leading_space_; }
  int32_t vocab_size() const override { return static_cast<int32_t>(bytes_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  /// True for control pieces and <unk>.
  bool is_special(int32_t id) const override;

  /// Sets the special tokens and chat template; called once while loading.
  void set_settings(tokenizer_settings s) { settings_ = std::move(s); }

  /// The model's own BOS / EOS ids, if it defines them.
  [[nodiscard]] std::optional<int32_t> model_bos_id() const;
  [[nodiscard]] std::optional<int32_t> model_eos_id() const;

private:
  sp_tokenizer();

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> bytes_; // [vocab_size] token_bytes of each id
  std::vector<uint8_t> special_;   // [vocab_size]
  added_token_matcher specials_;
  bool strips_leading_space_ = false;
};

} // namespace tessera::engine
