#pragma once
/// @file
/// Shared by the grammar tests: the demo tokenizer's vocabulary as the
/// grammar sees it, and a small JSON Schema validator for the keywords the
/// grammar compiler supports (independent of the compiler's code).

#include <cmath>
#include <map>
#include <memory>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/grammar/token_mask.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer.hpp"
#include "engine/tokenizer_builder.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::test::grammar_support {

/// The demo byte-level BPE tokenizer with `vocab_size` ids, cached.
inline std::shared_ptr<const engine::tokenizer> demo_tokenizer(int32_t vocab_size) {
  static std::map<int32_t, std::shared_ptr<const engine::tokenizer>> cache;
  auto& slot = cache[vocab_size];
  if (!slot) {
    temp_dir dir("tessera-grammar-tok");
    if (auto err = engine::write_demo_tokenizer(dir.path(), vocab_size))
      ADD_FAILURE() << error_text(err);
    auto tok = engine::load_tokenizer(dir.path(), engine::model_config{});
    if (!tok)
      ADD_FAILURE() << error_text(tok.error());
    else
      slot = std::shared_ptr<const engine::tokenizer>(std::move(*tok));
  }
  return slot;
}

/// A tokenizer's vocabulary for the grammar: token bytes, special flags,
/// EOS ids (the settings' or, if none, the demo tokenizer's two).
inline engine::grammar::grammar_vocabulary vocabulary_of(const engine::tokenizer& tok) {
  engine::grammar::grammar_vocabulary v;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    v.token_bytes.push_back(tok.token_bytes(id));
    v.special.push_back(tok.is_special(id));
  }
  v.eos_ids = tok.settings().eos_ids;
  if (v.eos_ids.empty())
    v.eos_ids = {engine::demo_special_ids::end_of_text, engine::demo_special_ids::eot};
  return v;
}

/// The trie of demo_tokenizer(vocab_size), cached.
inline const engine::grammar::token_trie& demo_trie(int32_t vocab_size) {
  static std::map<int32_t, std::unique_ptr<engine::grammar::token_trie>> cache;
  auto& slot = cache[vocab_size];
  if (!slot)
    slot = std::make_unique<engine::grammar::token_trie>(
        vocabulary_of(*demo_tokenizer(vocab_size)));
  return *slot;
}

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    n += (c & 0xC0) != 0x80;
  return n;
}

/// Validates `v` against `schema` (resolving $ref against `root`) for the
/// supported keywords; oneOf means exactly one, as JSON Schema says. Sets
/// `why` on failure. Patterns are checked with std::regex only on ASCII
/// strings (the Python cross-check covers the rest).
inline bool validate(const nlohmann::json& root, const nlohmann::json& schema,
                     const nlohmann::json& v, std::string& why, int depth = 0) {
  using nlohmann::json;
  if (depth > 200) {
    why = "validator recursion too deep";
    return false;
  }
  if (schema.is_boolean())
    return schema.get<bool>();
  if (schema.contains("$ref")) {
    std::string ref = schema["$ref"].get<std::string>().substr(1);
    const json& target = ref.empty() ? root : root.at(json::json_pointer(ref));
    return validate(root, target, v, why, depth + 1);
  }
  if (schema.contains("anyOf")) {
    for (const auto& alt : schema["anyOf"]) {
      std::string ignored;
      if (validate(root, alt, v, ignored, depth + 1))
        return true;
    }
    why = "no anyOf alternative matches " + v.dump();
    return false;
  }
  if (schema.contains("oneOf")) {
    int matches = 0;
    for (const auto& alt : schema["oneOf"]) {
      std::string ignored;
      matches += validate(root, alt, v, ignored, depth + 1) ? 1 : 0;
    }
    if (matches != 1)
      why = std::to_string(matches) + " oneOf alternatives match " + v.dump();
    return matches == 1;
  }
  if (schema.contains("enum")) {
    for (const auto& e : schema["enum"])
      if (e == v)
        return true;
    why = v.dump() + " not in enum";
    return false;
  }
  if (schema.contains("const") && schema["const"] != v) {
    why = v.dump() + " is not the const";
    return false;
  }
  if (schema.contains("type")) {
    json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool ok = false;
    for (const auto& t : types) {
      std::string ty = t.get<std::string>();
      ok = ok || (ty == "null" && v.is_null()) || (ty == "boolean" && v.is_boolean()) ||
           (ty == "string" && v.is_string()) || (ty == "array" && v.is_array()) ||
           (ty == "object" && v.is_object()) || (ty == "number" && v.is_number()) ||
           (ty == "integer" && (v.is_number_integer() ||
                                (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()))));
    }
    if (!ok) {
      why = v.dump() + " has the wrong type for " + types.dump();
      return false;
    }
  }
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    size_t n = code_points(s);
    if (schema.contains("minLength") && n < schema["minLength"].get<size_t>()) {
      why = "string shorter than minLength: " + v.dump();
      return false;
    }
    if (schema.contains("maxLength") && n > schema["maxLength"].get<size_t>()) {
      why = "string longer than maxLength: " + v.dump();
      return false;
    }
    bool ascii = n == s.size();
    if (schema.contains("pattern") && ascii &&
        !std::regex_search(s, std::regex(schema["pattern"].get<std::string>(),
                                         std::regex::ECMAScript))) {
      why = v.dump() + " does not match pattern " + schema["pattern"].dump();
      return false;
    }
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) {
      why = "array shorter than minItems";
      return false;
    }
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) {
      why = "array longer than maxItems";
      return false;
    }
    if (schema.contains("items"))
      for (const auto& item : v)
        if (!validate(root, schema["items"], item, why, depth + 1))
          return false;
  }
  if (v.is_object()) {
    if (schema.contains("required"))
      for (const auto& r : schema["required"])
        if (!v.contains(r.get<std::string>())) {
          why = "missing required property " + r.dump();
          return false;
        }
    for (const auto& [k, val] : v.items()) {
      if (schema.contains("properties") && schema["properties"].contains(k)) {
        if (!validate(root, schema["properties"][k], val, why, depth + 1))
          return false;
      } else if (schema.contains("additionalProperties")) {
        if (!validate(root, schema["additionalProperties"], val, why, depth + 1)) {
          if (why.empty())
            why = "additional property " + k + " not allowed";
          return false;
        }
      }
    }
  }
  return true;
}

} // namespace tessera::test::grammar_support
