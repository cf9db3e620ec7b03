#pragma once
/// @file
/// Writes the tokenizer of Tessera's random-weight demo and test models: a
/// byte-level BPE tokenizer.json (Llama 3 pre-tokenizer regex, GPT-2 byte
/// mapping) whose merges are learnt from a built-in English text, plus a
/// tokenizer_config.json with a Llama 3 style chat template.
///
/// Id layout (fixed, so model configs can name BOS/EOS without reading the
/// tokenizer):
///   0 <|begin_of_text|> (BOS)      1 <|end_of_text|> (EOS)
///   2 <|start_header_id|>          3 <|end_header_id|>
///   4 <|eot_id|> (EOS in chat)     5..7 <|reserved_special_token_0..2|>
///   8..263 the 256 byte tokens     264.. merges, up to vocab_size

#include <cstdint>
#include <filesystem>

#include <caf/error.hpp>

namespace tessera::engine {

/// Ids of the demo tokenizer's special tokens.
struct demo_special_ids {
  static constexpr int32_t begin_of_text = 0;
  static constexpr int32_t end_of_text = 1;
  static constexpr int32_t start_header = 2;
  static constexpr int32_t end_header = 3;
  static constexpr int32_t eot = 4;
  static constexpr int32_t first_byte_token = 8;
  static constexpr int32_t first_merge = 264;
};

/// Smallest vocabulary the demo tokenizer can have.
constexpr int32_t demo_tokenizer_min_vocab = 300;

/// Writes tokenizer.json and tokenizer_config.json for a vocabulary of
/// exactly `vocab_size` ids into `dir`. Deterministic.
[[nodiscard]] caf::error write_demo_tokenizer(const std::filesystem::path& dir,
                                              int32_t vocab_size);

} // namespace tessera::engine
