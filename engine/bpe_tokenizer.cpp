#include "engine/bpe_tokenizer.hpp"

#include <algorithm>
#include <queue>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/byte_level.hpp"
#include "engine/engine_errc.hpp"
#include "engine/read_file.hpp"
#include "engine/utf8.hpp"

namespace tessera::engine {

namespace {

using json = nlohmann::json;

/// Ids above this are rejected: they would make us allocate per-id tables
/// for a vocabulary no model has.
constexpr int64_t max_token_id = (int64_t{1} << 24) - 1;

/// Words longer than this (bytes) are not cached.
constexpr size_t max_cached_word = 256;
/// The cache is cleared when it grows past this many words.
constexpr size_t max_cache_entries = 1 << 16;

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

std::string type_of(const json& node) {
  if (node.is_object())
    if (auto it = node.find("type"); it != node.end() && it->is_string())
      return it->get<std::string>();
  return {};
}

/// Reads an optional boolean field; a present non-boolean is an error.
bool get_bool(const json& obj, const char* key, bool fallback, std::string& error) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    return fallback;
  if (!it->is_boolean()) {
    error = std::string{"'"} + key + "' is not a boolean";
    return fallback;
  }
  return it->get<bool>();
}

/// Makes the errors of one tokenizer.json: bad_tokenizer, naming the file.
class error_maker {
public:
  explicit error_maker(std::string_view source) : source_(source) {}

  [[nodiscard]] caf::error fail(const std::string& what) const {
    return make_engine_error(engine_errc::bad_tokenizer, source_ + ": " + what);
  }

private:
  std::string source_;
};

} // namespace

caf::expected<std::unique_ptr<bpe_tokenizer>> bpe_tokenizer::parse(std::string_view json_text,
                                                                   std::string_view source) {
  error_maker p{source};
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return p.fail(std::string{"not valid JSON: "} + e.what());
  }
  // Any access below that finds an unexpected type throws; turn it into an
  // error rather than letting it escape.
  try {
    if (!root.is_object())
      return p.fail("top level is not a JSON object");
    auto model_it = root.find("model");
    if (model_it == root.end() || !model_it->is_object())
      return p.fail("missing 'model' object");
    const json& model = *model_it;
    if (auto t = type_of(model); !t.empty() && t != "BPE")
      return p.fail("unsupported model type '" + t + "' (only BPE is supported)");
    if (model.contains("type") && !model["type"].is_string())
      return p.fail("model 'type' is not a string");
    std::string error;
    if (get_bool(model, "byte_fallback", false, error))
      return p.fail("BPE with byte_fallback (a converted sentencepiece model) is not supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      auto it = model.find(key);
      if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
        return p.fail(std::string{"unsupported model '"} + key + "'");
    }

    auto tok = std::unique_ptr<bpe_tokenizer>(new bpe_tokenizer());
    tok->ignore_merges_ = get_bool(model, "ignore_merges", false, error);
    if (!error.empty())
      return p.fail("model " + error);

    if (auto err = tok->read_vocab(root, model, source))
      return err;
    if (auto err = tok->read_merges(model, source))
      return err;
    if (auto err = tok->read_pipeline(root, source))
      return err;
    return tok;
  } catch (const json::exception& e) {
    return p.fail(std::string{"unexpected JSON structure: "} + e.what());
  }
}

// Vocabulary, added tokens, the byte tokens and unk_token.
caf::error bpe_tokenizer::read_vocab(const json& root, const json& model, std::string_view source) {
  error_maker p{source};
  std::string error;
  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object())
    return p.fail("missing 'model.vocab' object");
  if (vocab_it->empty())
    return p.fail("'model.vocab' is empty");
  int64_t max_id = -1;
  for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
    if (!it->is_number_integer())
      return p.fail("vocab entry '" + it.key() + "' has a non-integer id");
    auto id = it->get<int64_t>();
    if (id < 0 || id > max_token_id)
      return p.fail("vocab entry '" + it.key() + "' has id " + std::to_string(id) +
                    " out of range");
    max_id = std::max(max_id, id);
  }

  struct added_entry {
    std::string content;
    int64_t id;
    bool special;
  };
  std::vector<added_entry> added;
  if (auto it = root.find("added_tokens"); it != root.end() && !it->is_null()) {
    if (!it->is_array())
      return p.fail("'added_tokens' is not an array");
    for (const auto& a : *it) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string())
        return p.fail("added token " + a.dump() + " lacks an integer 'id' or a string 'content'");
      added_entry e{a["content"].get<std::string>(), a["id"].get<int64_t>(),
                    get_bool(a, "special", false, error)};
      if (!error.empty())
        return p.fail("added token '" + e.content + "': " + error);
      if (e.id < 0 || e.id > max_token_id)
        return p.fail("added token '" + e.content + "' has id " + std::to_string(e.id) +
                      " out of range");
      if (e.content.empty())
        return p.fail("added token " + std::to_string(e.id) + " has empty content");
      max_id = std::max(max_id, e.id);
      added.push_back(std::move(e));
    }
  }

  auto n = static_cast<size_t>(max_id + 1);
  tokens_.resize(n);
  bytes_.resize(n);
  special_.assign(n, 0);
  std::vector<uint8_t> taken(n, 0);
  ids_.reserve(n);
  for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
    auto id = static_cast<size_t>(it->get<int64_t>());
    if (taken[id] != 0)
      return p.fail("duplicate id " + std::to_string(id) + " for vocab entries '" +
                    tokens_[id] + "' and '" + it.key() + "'");
    taken[id] = 1;
    tokens_[id] = it.key();
    bytes_[id] = from_byte_level(it.key());
    ids_.emplace(it.key(), static_cast<int32_t>(id));
  }
  std::vector<added_token_matcher::entry> matcher_entries;
  for (auto& e : added) {
    auto id = static_cast<size_t>(e.id);
    if (taken[id] == 1 && tokens_[id] != e.content)
      return p.fail("added token '" + e.content + "' reuses id " + std::to_string(id) +
                    " of vocab entry '" + tokens_[id] + "'");
    if (taken[id] == 2)
      return p.fail("duplicate id " + std::to_string(id) + " for added tokens '" +
                    tokens_[id] + "' and '" + e.content + "'");
    if (auto found = ids_.find(e.content);
        found != ids_.end() && found->second != static_cast<int32_t>(id))
      return p.fail("added token '" + e.content + "' has id " + std::to_string(id) +
                    " but the vocab gives it id " + std::to_string(found->second));
    taken[id] = 2;
    tokens_[id] = e.content;
    bytes_[id] = e.content; // added tokens are stored as raw text
    special_[id] = e.special ? 1 : 0;
    ids_.insert_or_assign(e.content, static_cast<int32_t>(id));
    matcher_entries.push_back({e.content, static_cast<int32_t>(id), e.special});
  }
  added_ = added_token_matcher(std::move(matcher_entries));

  const auto& chars = byte_level_chars();
  for (size_t b = 0; b < 256; ++b) {
    auto it = ids_.find(chars[b]);
    byte_ids_[b] = it == ids_.end() ? -1 : it->second;
  }

  if (auto it = model.find("unk_token"); it != model.end() && !it->is_null()) {
    if (!it->is_string())
      return p.fail("'model.unk_token' is not a string");
    auto found = ids_.find(it->get<std::string>());
    if (found == ids_.end())
      return p.fail("unk_token '" + it->get<std::string>() + "' is not in the vocab");
    unk_id_ = found->second;
  }
  return {};
}

// Merges, in rank order; every token they name must be in the vocabulary.
caf::error bpe_tokenizer::read_merges(const json& model, std::string_view source) {
  error_maker p{source};
  auto merges_it = model.find("merges");
  if (merges_it == model.end() || !merges_it->is_array())
    return p.fail("missing 'model.merges' array");
  merges_.reserve(merges_it->size());
  int32_t rank = 0;
  for (const auto& m : *merges_it) {
    std::string left;
    std::string right;
    if (m.is_string()) {
      auto s = m.get<std::string>();
      auto space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        return p.fail("merge " + std::to_string(rank) + " '" + s +
                      "' is not two tokens separated by one space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return p.fail("merge " + std::to_string(rank) + " " + m.dump() +
                    " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto name = "merge " + std::to_string(rank) + " '" + left + " " + right + "'";
    auto l = ids_.find(left);
    if (l == ids_.end())
      return p.fail(name + ": '" + left + "' is not in the vocab");
    auto r = ids_.find(right);
    if (r == ids_.end())
      return p.fail(name + ": '" + right + "' is not in the vocab");
    auto result = ids_.find(left + right);
    if (result == ids_.end())
      return p.fail(name + ": the merged token '" + left + right + "' is not in the vocab");
    // A repeated pair keeps its first (best) rank.
    merges_.try_emplace(pair_key(l->second, r->second),
                             merge_entry{rank, result->second});
    ++rank;
  }

  return {};
}

// Normalizer, pre-tokenizer and decoder.
caf::error bpe_tokenizer::read_pipeline(const json& root, std::string_view source) {
  error_maker p{source};
  std::string error;
  // Normalizer: none, or NFC taken as already applied.
  if (auto it = root.find("normalizer"); it != root.end() && !it->is_null()) {
    auto t = type_of(*it);
    bool ok = t == "NFC";
    if (t == "Sequence" && it->contains("normalizers") && (*it)["normalizers"].is_array()) {
      ok = true;
      for (const auto& sub : (*it)["normalizers"])
        ok = ok && type_of(sub) == "NFC";
    }
    if (!ok)
      return p.fail("unsupported normalizer '" + (t.empty() ? it->dump() : t) +
                    "' (supported: none, NFC)");
  }

  // Pre-tokenizer: Split stages, then ByteLevel.
  bool byte_level = false;
  std::vector<const json*> stages;
  if (auto it = root.find("pre_tokenizer"); it != root.end() && !it->is_null()) {
    if (type_of(*it) == "Sequence") {
      if (!it->contains("pretokenizers") || !(*it)["pretokenizers"].is_array())
        return p.fail("pre_tokenizer Sequence lacks a 'pretokenizers' array");
      for (const auto& sub : (*it)["pretokenizers"])
        stages.push_back(&sub);
    } else {
      stages.push_back(&*it);
    }
  }
  for (const json* stage : stages) {
    auto t = type_of(*stage);
    if (t == "ByteLevel") {
      if (byte_level)
        return p.fail("pre_tokenizer has two ByteLevel stages");
      byte_level = true;
      split_step step;
      step.prefix_space = get_bool(*stage, "add_prefix_space", true, error);
      bool use_regex = get_bool(*stage, "use_regex", true, error);
      if (!error.empty())
        return p.fail("pre_tokenizer ByteLevel " + error);
      if (use_regex) {
        auto re = regex_splitter::compile(gpt2_split_pattern);
        if (!re)
          return p.fail("GPT-2 pre-tokenizer regex: " + error_message(re.error()));
        step.splitter.emplace(std::move(*re));
      }
      steps_.push_back(std::move(step));
    } else if (t == "Split") {
      if (byte_level)
        return p.fail("pre_tokenizer Split after ByteLevel is not supported");
      if (stage->contains("behavior") && (*stage)["behavior"] != "Isolated")
        return p.fail("pre_tokenizer Split behavior " + (*stage)["behavior"].dump() +
                      " is not supported (only Isolated)");
      if (get_bool(*stage, "invert", false, error) || !error.empty())
        return p.fail("pre_tokenizer Split 'invert' is not supported");
      auto pat = stage->find("pattern");
      if (pat == stage->end() || !pat->is_object())
        return p.fail("pre_tokenizer Split lacks a 'pattern' object");
      bool literal = pat->contains("String");
      const char* key = literal ? "String" : "Regex";
      if (!pat->contains(key) || !(*pat)[key].is_string())
        return p.fail("pre_tokenizer Split pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
      auto re = regex_splitter::compile((*pat)[key].get<std::string>(), literal);
      if (!re)
        return p.fail("pre_tokenizer Split pattern: " + error_message(re.error()));
      split_step step;
      step.splitter.emplace(std::move(*re));
      steps_.push_back(std::move(step));
    } else {
      return p.fail("unsupported pre_tokenizer '" + (t.empty() ? stage->dump() : t) +
                    "' (supported: ByteLevel, Split, Sequence)");
    }
  }
  if (!byte_level)
    return p.fail("pre_tokenizer has no ByteLevel stage: only byte-level BPE is supported");

  auto dec = root.find("decoder");
  if (dec == root.end() || type_of(*dec) != "ByteLevel")
    return p.fail("unsupported decoder " +
                  (dec == root.end() ? std::string{"(missing)"} : "'" + type_of(*dec) + "'") +
                  " (only ByteLevel is supported)");
  return {};
}

caf::expected<std::unique_ptr<bpe_tokenizer>>
bpe_tokenizer::load(const std::filesystem::path& file) {
  auto text = read_file_text(file);
  if (!text)
    return std::move(text.error());
  return parse(*text, file.string());
}

void bpe_tokenizer::pre_tokenize_into(std::string_view text, std::vector<std::string_view>& pieces,
                                      std::deque<std::string>& storage) const {
  pieces.assign(1, text);
  std::vector<std::string_view> next;
  for (const auto& step : steps_) {
    next.clear();
    for (auto piece : pieces) {
      if (step.prefix_space && (piece.empty() || piece.front() != ' ')) {
        auto& prefixed = storage.emplace_back(1, ' ');
        prefixed.append(piece);
        piece = prefixed;
      }
      if (step.splitter)
        step.splitter->split(piece, next);
      else if (!piece.empty())
        next.push_back(piece);
    }
    pieces.swap(next);
  }
}

std::vector<std::string> bpe_tokenizer::pre_tokenize(std::string_view text) const {
  auto clean = utf8_sanitize(text);
  std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  pre_tokenize_into(clean, pieces, storage);
  return {pieces.begin(), pieces.end()};
}

void bpe_tokenizer::merge_word(std::vector<int32_t>& ids) const {
  if (ids.size() < 2)
    return;
  // Symbols form a linked list; a min-heap holds candidate merges ordered
  // by rank, then position, as Hugging Face applies them. Entries whose
  // symbols changed since they were pushed are skipped when popped.
  struct symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct candidate {
    int32_t rank;
    int32_t left;
    int32_t left_id;
    int32_t right_id;
    int32_t result;
    bool operator>(const candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  auto n = static_cast<int32_t>(ids.size());
  std::vector<symbol> syms(ids.size());
  for (int32_t i = 0; i < n; ++i)
    syms[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<candidate, std::vector<candidate>, std::greater<>> heap;
  auto push = [&](int32_t left) {
    if (left < 0 || syms[left].next < 0)
      return;
    const auto& a = syms[left];
    const auto& b = syms[a.next];
    if (auto it = merges_.find(pair_key(a.id, b.id)); it != merges_.end())
      heap.push({it->second.rank, left, a.id, b.id, it->second.result});
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    push(i);
  while (!heap.empty()) {
    auto c = heap.top();
    heap.pop();
    auto& a = syms[c.left];
    if (a.id != c.left_id || a.next < 0 || syms[a.next].id != c.right_id)
      continue; // stale
    auto right = a.next;
    a.id = c.result;
    a.next = syms[right].next;
    if (a.next >= 0)
      syms[a.next].prev = c.left;
    syms[right].id = -1;
    push(a.prev);
    push(c.left);
  }
  ids.clear();
  for (int32_t i = 0; i >= 0; i = syms[i].next)
    ids.push_back(syms[i].id);
}

void bpe_tokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  bool cacheable = word.size() <= max_cached_word;
  if (cacheable) {
    std::lock_guard guard{cache_mutex_};
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  if (ignore_merges_) {
    if (auto it = ids_.find(to_byte_level(word)); it != ids_.end())
      ids.push_back(it->second);
  }
  if (ids.empty()) {
    ids.reserve(word.size());
    for (char c : word) {
      auto id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0)
        ids.push_back(id);
      else if (unk_id_)
        ids.push_back(*unk_id_);
    }
    merge_word(ids);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard guard{cache_mutex_};
    if (cache_.size() >= max_cache_entries)
      cache_.clear();
    cache_.emplace(std::string{word}, std::move(ids));
  }
}

std::vector<int32_t> bpe_tokenizer::encode(std::string_view text, bool add_bos,
                                           bool parse_special) const {
  std::vector<int32_t> out;
  // The regex engine needs well-formed UTF-8.
  std::string clean;
  text = begin_encode(text, add_bos, out, clean);
  std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  added_.split(
    text, parse_special,
    [&](std::string_view segment) {
      storage.clear();
      pre_tokenize_into(segment, pieces, storage);
      for (auto piece : pieces)
        encode_word(piece, out);
    },
    [&](int32_t id) { out.push_back(id); });
  return out;
}

std::string bpe_tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (auto id : ids) {
    if (id < 0 || id >= vocab_size() || (skip_special && special_[id] != 0))
      continue;
    bytes += bytes_[id];
  }
  return utf8_sanitize(bytes);
}

std::string bpe_tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    return {};
  return bytes_[id];
}

std::optional<int32_t> bpe_tokenizer::token_to_id(std::string_view token) const {
  if (auto it = ids_.find(token); it != ids_.end())
    return it->second;
  return std::nullopt;
}

std::string bpe_tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    return {};
  return tokens_[id];
}

bool bpe_tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id] != 0;
}

} // namespace tessera::engine
