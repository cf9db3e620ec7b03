#include "engine/tokenizer_builder.hpp"

#include <array>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/assert.hpp"
#include "common/error.hpp"
#include "engine/bpe_trainer.hpp"
#include "engine/byte_level.hpp"
#include "engine/demo_corpus.hpp"
#include "engine/engine_errc.hpp"
#include "engine/regex_splitter.hpp"

namespace tessera::engine {

namespace {

using json = nlohmann::json;

/// Largest vocabulary write_demo_tokenizer accepts.
constexpr int32_t demo_tokenizer_max_vocab = 1 << 18;

constexpr std::array<std::string_view, 8> special_tokens = {
  "<|begin_of_text|>",          "<|end_of_text|>",
  "<|start_header_id|>",        "<|end_header_id|>",
  "<|eot_id|>",                 "<|reserved_special_token_0|>",
  "<|reserved_special_token_1|>", "<|reserved_special_token_2|>",
};
static_assert(special_tokens.size() == demo_special_ids::first_byte_token);

constexpr std::string_view chat_template =
  "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}"
  "<|end_header_id|>\n\n{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
  "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

/// JSON string literal of `s` (valid UTF-8).
std::string json_quoted(std::string_view s) { return json(s).dump(); }

json pre_tokenizer_json() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           json::array({{{"type", "Split"},
                         {"pattern", {{"Regex", llama3_split_pattern}}},
                         {"behavior", "Isolated"},
                         {"invert", false}},
                        {{"type", "ByteLevel"},
                         {"add_prefix_space", false},
                         {"trim_offsets", true},
                         {"use_regex", false}}})}};
}

/// Llama 3's post-processor: BOS before each sequence.
json post_processor_json() {
  std::string bos{special_tokens[0]};
  auto seq = [](const char* id) { return json{{"Sequence", {{"id", id}, {"type_id", 0}}}}; };
  auto special = [&] { return json{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}; };
  return {{"type", "TemplateProcessing"},
          {"single", json::array({special(), seq("A")})},
          {"pair", json::array({special(), seq("A"), special(), seq("B")})},
          {"special_tokens",
           {{bos, {{"id", bos}, {"ids", json::array({demo_special_ids::begin_of_text})},
                   {"tokens", json::array({bos})}}}}}};
}

/// The words of the corpus as the Llama 3 pre-tokenizer cuts them, counted.
std::vector<bpe_word_count> corpus_words() {
  auto splitter = regex_splitter::compile(llama3_split_pattern);
  TESSERA_ASSERT(static_cast<bool>(splitter), "the Llama 3 regex must compile");
  std::vector<std::string_view> pieces;
  splitter->split(demo_corpus(), pieces);
  std::map<std::string_view, int64_t> counts; // ordered: deterministic
  for (auto p : pieces)
    ++counts[p];
  std::vector<bpe_word_count> words;
  words.reserve(counts.size());
  for (const auto& [w, n] : counts)
    words.push_back({std::string{w}, n});
  return words;
}

/// tokenizer.json text. Written by hand rather than through nlohmann's
/// object so the vocabulary stays in id order and large vocabularies write
/// fast.
std::string tokenizer_json(const bpe_training& training) {
  std::string out;
  out.reserve(training.symbols.size() * 48);
  out += "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  out += "  \"added_tokens\": [";
  for (size_t i = 0; i < special_tokens.size(); ++i) {
    json t = {{"id", i},
              {"content", special_tokens[i]},
              {"single_word", false},
              {"lstrip", false},
              {"rstrip", false},
              {"normalized", false},
              {"special", true}};
    out += i == 0 ? "\n    " : ",\n    ";
    out += t.dump();
  }
  out += "\n  ],\n  \"normalizer\": null,\n";
  out += "  \"pre_tokenizer\": " + pre_tokenizer_json().dump() + ",\n";
  out += "  \"post_processor\": " + post_processor_json().dump() + ",\n";
  out += R"(  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},)";
  out += "\n  \"model\": {\n";
  out += "    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n";
  out += "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n";
  out += "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n";
  out += "    \"vocab\": {";
  int32_t id = 0;
  auto entry = [&](std::string_view token) {
    out += id == 0 ? "\n      " : ",\n      ";
    out += json_quoted(token);
    out += ": ";
    out += std::to_string(id++);
  };
  for (auto s : special_tokens)
    entry(s);
  for (const auto& sym : training.symbols)
    entry(to_byte_level(sym));
  out += "\n    },\n    \"merges\": [";
  bool first = true;
  for (const auto& m : training.merges) {
    out += first ? "\n      " : ",\n      ";
    first = false;
    out += json_quoted(to_byte_level(training.symbols[m.left]) + " " +
                  to_byte_level(training.symbols[m.right]));
  }
  out += "\n    ]\n  }\n}\n";
  return out;
}

std::string tokenizer_config_json() {
  json cfg = {{"add_bos_token", true},
              {"add_eos_token", false},
              {"bos_token", special_tokens[demo_special_ids::begin_of_text]},
              {"eos_token", special_tokens[demo_special_ids::eot]},
              {"chat_template", chat_template},
              {"clean_up_tokenization_spaces", false},
              {"model_max_length", 1 << 20},
              {"tokenizer_class", "PreTrainedTokenizerFast"}};
  return cfg.dump(2) + "\n";
}

/// Writes `text` to `file` through a temporary file and a rename, so a
/// failed write leaves any previous file intact.
caf::error write_file(const std::filesystem::path& file, const std::string& text) {
  auto tmp = file;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return make_engine_error(engine_errc::io_error, tmp.string() + ": cannot create");
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out)
      return make_engine_error(engine_errc::io_error, tmp.string() + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return make_engine_error(engine_errc::io_error, file.string() + ": cannot write: " +
                                                      ec.message());
  }
  return {};
}

} // namespace

caf::error write_demo_tokenizer(const std::filesystem::path& dir, int32_t vocab_size) {
  if (vocab_size < demo_tokenizer_min_vocab || vocab_size > demo_tokenizer_max_vocab)
    return make_engine_error(engine_errc::bad_config,
                             "demo tokenizer vocab_size " + std::to_string(vocab_size) +
                               " is outside [" + std::to_string(demo_tokenizer_min_vocab) +
                               ", " + std::to_string(demo_tokenizer_max_vocab) + "]");
  std::unordered_set<std::string> reserved;
  for (auto s : special_tokens)
    reserved.emplace(s);
  auto symbol_count = static_cast<size_t>(vocab_size - demo_special_ids::first_byte_token);
  auto training = train_bpe(corpus_words(), symbol_count, reserved);
  TESSERA_ASSERT(training.symbols.size() == symbol_count);
  for (size_t i = 256; i < training.symbols.size(); ++i)
    TESSERA_ASSERT(!reserved.contains(training.symbols[i]), "a merge spells a special token");

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_engine_error(engine_errc::io_error,
                             dir.string() + ": cannot create folder: " + ec.message());
  if (auto err = write_file(dir / "tokenizer.json", tokenizer_json(training)))
    return err;
  return write_file(dir / "tokenizer_config.json", tokenizer_config_json());
}

} // namespace tessera::engine
