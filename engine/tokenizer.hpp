#pragma once
/// @file
/// Text <-> token ids. Two implementations behind one interface: Hugging
/// Face tokenizer.json byte-level BPE (GPT-2 / Llama 3 / Qwen2) and
/// sentencepiece tokenizer.model (Llama 2 / Mistral / TinyLlama).
/// load_tokenizer picks the one a model folder has.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::engine {

struct model_config;

/// Special tokens and chat settings of a model folder, merged from
/// config.json, generation_config.json and tokenizer_config.json (later
/// files win, as in transformers).
struct tokenizer_settings {
  std::optional<int32_t> bos_id;
  /// Every id that ends generation (generation_config may list several).
  std::vector<int32_t> eos_ids;
  std::optional<int32_t> pad_id;
  /// tokenizer_config.json "add_bos_token". Default: true if bos_id is set.
  bool add_bos = true;
  /// tokenizer_config.json "chat_template" (Jinja source), may be empty.
  std::string chat_template;
};

/// A tokenizer. Immutable after loading; all methods are thread-safe.
class tokenizer {
public:
  virtual ~tokenizer() = default;

  /// Encodes `text`. Special tokens written literally in the text (e.g.
  /// "<|eot_id|>") become their ids when `parse_special` is true, else they
  /// are encoded as plain text. Prepends BOS when `add_bos` is true and the
  /// model has one.
  [[nodiscard]] virtual std::vector<int32_t>
  encode(std::string_view text, bool add_bos = false, bool parse_special = true) const = 0;

  /// Decodes `ids` to UTF-8 text. Invalid UTF-8 byte sequences become U+FFFD.
  /// Special tokens are dropped when `skip_special` is true.
  [[nodiscard]] virtual std::string decode(std::span<const int32_t> ids,
                                           bool skip_special = true) const = 0;

  /// The raw bytes token `id` contributes when it follows other tokens
  /// (byte-level BPE: its bytes; sentencepiece: "\xe2\x96\x81" -> " ",
  /// <0xAB> byte tokens -> that byte). May be part of a UTF-8 character.
  /// Empty for ids out of range.
  [[nodiscard]] virtual std::string token_bytes(int32_t id) const = 0;

  /// True for sentencepiece-style tokenizers that drop one leading space
  /// from the decoded text of a sequence (add_dummy_prefix).
  [[nodiscard]] virtual bool strips_leading_space() const = 0;

  /// Number of ids (vocabulary plus added tokens).
  [[nodiscard]] virtual int32_t vocab_size() const = 0;

  /// The id of a token string (vocabulary or added token), if any.
  [[nodiscard]] virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;

  /// The token string of `id` as stored in the vocabulary (e.g. "Ġthe").
  [[nodiscard]] virtual std::string id_to_token(int32_t id) const = 0;

  /// True for added special tokens (BOS, EOS, chat markers).
  [[nodiscard]] virtual bool is_special(int32_t id) const = 0;

  /// Special tokens and chat template.
  [[nodiscard]] const tokenizer_settings& settings() const { return settings_; }

protected:
  /// The common start of every encode(): BOS into `out` when asked and
  /// known; returns `text`, or (if it is not valid UTF-8) a copy in
  /// `storage` with each invalid sequence replaced by U+FFFD.
  std::string_view begin_encode(std::string_view text, bool add_bos, std::vector<int32_t>& out,
                                std::string& storage) const;

  tokenizer_settings settings_;
};

/// Loads the tokenizer of a model folder: tokenizer.json if present, else
/// tokenizer.model; reads tokenizer_config.json and generation_config.json
/// for special tokens and the chat template. `cfg` supplies BOS/EOS from
/// config.json. Errors (engine_errc::bad_tokenizer / io_error) name the
/// file and what is wrong with it.
[[nodiscard]] caf::expected<std::unique_ptr<tokenizer>>
load_tokenizer(const std::filesystem::path& dir, const model_config& cfg);

} // namespace tessera::engine
