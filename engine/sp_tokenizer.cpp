#include "engine/sp_tokenizer.hpp"

#include <sentencepiece_processor.h>

#include "engine/engine_errc.hpp"
#include "engine/utf8.hpp"
#include "common/hex.hpp"

namespace tessera::engine {

namespace {

constexpr std::string_view sp_space = "\xE2\x96\x81"; // U+2581 LOWER ONE EIGHTH BLOCK

/// Parses a byte-fallback piece "<0xAB>".
std::optional<char> parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece.back() != '>')
    return std::nullopt;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    const int d = hex_digit_value(c);
    if (d < 0)
      return std::nullopt;
    value = value * 16 + d;
  }
  return static_cast<char>(value);
}

std::string replace_sp_space(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  size_t i = 0;
  while (i < piece.size()) {
    if (piece.substr(i, sp_space.size()) == sp_space) {
      out.push_back(' ');
      i += sp_space.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

} // namespace

sp_tokenizer::sp_tokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

sp_tokenizer::~sp_tokenizer() = default;

caf::expected<std::unique_ptr<sp_tokenizer>> sp_tokenizer::load(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    return make_engine_error(engine_errc::io_error, file.string() + ": not a readable file");
  auto tok = std::unique_ptr<sp_tokenizer>(new sp_tokenizer());
  if (auto st = tok->sp_->Load(file.string()); !st.ok())
    return make_engine_error(engine_errc::bad_tokenizer,
                             file.string() + ": not a sentencepiece model: " + st.ToString());
  auto n = tok->sp_->GetPieceSize();
  if (n <= 0)
    return make_engine_error(engine_errc::bad_tokenizer, file.string() + ": empty vocabulary");
  tok->bytes_.resize(static_cast<size_t>(n));
  tok->special_.assign(static_cast<size_t>(n), 0);
  std::vector<added_token_matcher::entry> specials;
  for (int id = 0; id < n; ++id) {
    const auto& piece = tok->sp_->IdToPiece(id);
    auto& bytes = tok->bytes_[static_cast<size_t>(id)];
    if (tok->sp_->IsByte(id)) {
      auto b = parse_byte_piece(piece);
      if (!b)
        return make_engine_error(engine_errc::bad_tokenizer,
                                 file.string() + ": byte piece " + std::to_string(id) + " '" +
                                   piece + "' is not of the form <0xAB>");
      bytes.assign(1, *b);
    } else if (tok->sp_->IsUnknown(id)) {
      bytes = " \xE2\x81\x87 ";
      tok->special_[static_cast<size_t>(id)] = 1;
      specials.push_back({piece, id, true});
    } else if (tok->sp_->IsControl(id)) {
      bytes = piece;
      tok->special_[static_cast<size_t>(id)] = 1;
      specials.push_back({piece, id, true});
    } else {
      bytes = replace_sp_space(piece);
    }
  }
  tok->specials_ = added_token_matcher(std::move(specials));
  // The normalizer spec is not exposed without the protobuf headers; probe
  // it: with add_dummy_prefix, "a" encodes as "▁a".
  std::vector<int> probe;
  if (tok->sp_->Encode("a", &probe).ok() && !probe.empty()) {
    std::string text;
    for (int id : probe)
      text += tok->token_bytes(id);
    tok->strips_leading_space_ = !text.empty() && text.front() == ' ';
  }
  return tok;
}

std::vector<int32_t> sp_tokenizer::encode(std::string_view text, bool add_bos,
                                          bool parse_special) const {
  std::vector<int32_t> out;
  std::string clean;
  text = begin_encode(text, add_bos, out, clean);
  std::vector<int> ids;
  auto encode_run = [&](std::string_view run) {
    ids.clear();
    // Encoding well-formed text fails only on an unloaded model.
    if (sp_->Encode(run, &ids).ok())
      out.insert(out.end(), ids.begin(), ids.end());
  };
  if (parse_special)
    specials_.split(text, true, encode_run, [&](int32_t id) { out.push_back(id); });
  else if (!text.empty())
    encode_run(text);
  return out;
}

std::string sp_tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  bool at_start = true;
  for (auto id : ids) {
    if (id < 0 || id >= vocab_size() || (skip_special && special_[id] != 0))
      continue;
    const auto& b = bytes_[id];
    if (at_start && strips_leading_space_ && !b.empty() && b.front() == ' ')
      bytes.append(b, 1);
    else
      bytes += b;
    at_start = at_start && b.empty();
  }
  return utf8_sanitize(bytes);
}

std::string sp_tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    return {};
  return bytes_[id];
}

std::optional<int32_t> sp_tokenizer::token_to_id(std::string_view token) const {
  int id = sp_->PieceToId(token);
  if (id < 0 || id >= vocab_size())
    return std::nullopt;
  // PieceToId answers <unk>'s id for unknown pieces.
  if (sp_->IsUnknown(id) && sp_->IdToPiece(id) != token)
    return std::nullopt;
  return id;
}

std::string sp_tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    return {};
  return sp_->IdToPiece(id);
}

bool sp_tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id] != 0;
}

std::optional<int32_t> sp_tokenizer::model_bos_id() const {
  int id = sp_->bos_id();
  return id >= 0 && id < vocab_size() ? std::optional<int32_t>{id} : std::nullopt;
}

std::optional<int32_t> sp_tokenizer::model_eos_id() const {
  int id = sp_->eos_id();
  return id >= 0 && id < vocab_size() ? std::optional<int32_t>{id} : std::nullopt;
}

} // namespace tessera::engine
