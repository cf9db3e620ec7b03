#include "engine/grammar/json_schema.hpp"

#include <map>
#include <set>

#include "engine/grammar/regex.hpp"

namespace tessera::engine::grammar {

namespace {

using json = nlohmann::ordered_json;

struct schema_failure {
  grammar_error error;
};

[[noreturn]] void fail(const std::string& pointer, const std::string& keyword,
                       const std::string& message) {
  throw schema_failure{{pointer, keyword, message}};
}

std::string escape_pointer(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k{"title",   "description", "$schema",    "$id",
                                       "$comment", "default",    "examples",   "deprecated",
                                       "readOnly", "writeOnly",  "$defs",      "definitions"};
  return k;
}

const std::set<std::string>& known_keywords() {
  static const std::set<std::string> k{
      "type",      "enum",      "const",     "properties", "required", "additionalProperties",
      "items",     "minItems",  "maxItems",  "minLength",  "maxLength", "pattern",
      "anyOf",     "oneOf",     "$ref",       "format"};
  return k;
}

// The string formats served, as the patterns generated strings follow
// (each a subset of what the format allows).
const char* format_pattern(const std::string& format) {
  static const std::map<std::string, const char*> patterns = {
      {"date", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])$)"},
      {"time", R"(^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
      {"date-time",
       R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|1\d|2[0-8])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
      {"uuid", R"(^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$)"},
      {"email", R"(^[a-z0-9._+-]{1,32}@[a-z0-9-]{1,32}(\.[a-z0-9-]{1,16}){0,2}\.[a-z]{2,6}$)"},
      {"ipv4", R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)"},
  };
  auto it = patterns.find(format);
  return it == patterns.end() ? nullptr : it->second;
}

class compiler {
public:
  compiler(const json& root, const json_grammar_options& opts) : root_(root), opts_(opts) {}

  uint32_t rule_for_pointer(const std::string& pointer) {
    if (auto it = memo_.find(pointer); it != memo_.end())
      return it->second;
    const json* s = &root_;
    if (!pointer.empty()) {
      try {
        s = &root_.at(json::json_pointer(pointer));
      } catch (const json::exception&) {
        fail(pointer, "$ref", "the reference points to nothing in the schema");
      }
    }
    uint32_t rule = b_.add_rule();
    memo_[pointer] = rule;
    fill_rule(rule, *s, pointer);
    return rule;
  }

  uint32_t rule_for(const json& s, const std::string& pointer) {
    uint32_t rule = b_.add_rule();
    fill_rule(rule, s, pointer);
    return rule;
  }

  uint32_t any_value_rule() {
    if (any_value_ != no_node)
      return any_value_;
    any_value_ = b_.add_rule();
    uint32_t from = b_.rule_start(any_value_);
    uint32_t to = b_.add_node(any_value_);
    b_.set_accepting(to);
    b_.add_call(from, any_object_rule(), to);
    emit_array(from, to, any_value_, 0, -1);
    emit_string(from, to, any_string_dfa(), 0, -1);
    emit_number(from, to, false);
    b_.add_literal(from, "true", to);
    b_.add_literal(from, "false", to);
    b_.add_literal(from, "null", to);
    return any_value_;
  }

  uint32_t any_object_rule() {
    if (any_object_ != no_node)
      return any_object_;
    any_object_ = b_.add_rule();
    uint32_t from = b_.rule_start(any_object_);
    uint32_t to = b_.add_node(any_object_);
    b_.set_accepting(to);
    emit_object(from, to, {}, any_value_rule());
    return any_object_;
  }

  grammar_builder& builder() { return b_; }

private:
  struct property {
    std::string name;
    uint32_t rule = 0;
    bool required = false;
  };

  void fill_rule(uint32_t rule, const json& s, const std::string& pointer) {
    uint32_t from = b_.rule_start(rule);
    uint32_t to = b_.add_node(rule);
    b_.set_accepting(to);
    emit_schema(from, to, s, pointer);
  }

  // A hostile schema (many large bounds) must fail before it uses the
  // memory, not after: checked wherever the builder grows in a loop.
  void check_size(const char* keyword) {
    if (b_.node_count() > opts_.limits.max_nodes)
      fail("", keyword,
           "the schema compiles to an automaton too large (more than " +
               std::to_string(opts_.limits.max_nodes) + " states); use smaller bounds");
  }

  // Optional whitespace from `from`; returns the node after it.
  uint32_t ws(uint32_t from) {
    uint32_t rule = b_.rule_of(from);
    uint32_t after = b_.add_node(rule);
    b_.add_epsilon(from, after);
    uint32_t cur = from;
    for (int k = 0; k < opts_.max_whitespace; ++k) {
      uint32_t next = b_.add_node(rule);
      for (char c : {' ', '\n', '\t'})
        b_.add_bytes(cur, static_cast<uint8_t>(c), static_cast<uint8_t>(c), next);
      b_.add_epsilon(next, after);
      cur = next;
    }
    return after;
  }

  // ws literal ws
  uint32_t punct(uint32_t from, char c) {
    uint32_t a = ws(from);
    uint32_t b = b_.add_node(b_.rule_of(from));
    b_.add_bytes(a, static_cast<uint8_t>(c), static_cast<uint8_t>(c), b);
    return ws(b);
  }

  int bound(const json& s, const std::string& pointer, const char* key, int dflt) {
    auto it = s.find(key);
    if (it == s.end())
      return dflt;
    if (!it->is_number_integer() && !(it->is_number_float() && it->get<double>() == static_cast<double>(static_cast<long long>(it->get<double>()))))
      fail(pointer, key, std::string(key) + " must be a non-negative integer");
    double v = it->get<double>();
    if (v < 0)
      fail(pointer, key, std::string(key) + " must be a non-negative integer");
    if (v > opts_.max_unrolled)
      fail(pointer, key,
           std::string(key) + " above " + std::to_string(opts_.max_unrolled) + " is not supported");
    return static_cast<int>(v);
  }

  void emit_schema(uint32_t from, uint32_t to, const json& s, const std::string& pointer) {
    if (s.is_boolean()) {
      if (!s.get<bool>())
        fail(pointer, "false", "the schema 'false' admits no value");
      b_.add_call(from, any_value_rule(), to);
      return;
    }
    if (!s.is_object())
      fail(pointer, "", "a schema must be an object or a boolean");
    std::vector<std::string> constraining;
    for (const auto& [k, v] : s.items()) {
      if (annotation_keywords().count(k))
        continue;
      if (!known_keywords().count(k))
        fail(pointer, k, "unsupported JSON Schema keyword '" + k + "'");
      constraining.push_back(k);
    }
    auto only = [&](const std::string& main, std::initializer_list<const char*> also) {
      for (const auto& k : constraining) {
        if (k == main)
          continue;
        bool ok = false;
        for (const char* a : also)
          ok = ok || k == a;
        if (!ok)
          fail(pointer, k, "'" + k + "' combined with '" + main + "' is not supported");
      }
    };
    if (s.contains("$ref")) {
      only("$ref", {});
      const json& ref = s["$ref"];
      if (!ref.is_string() || ref.get<std::string>().empty() || ref.get<std::string>()[0] != '#')
        fail(pointer, "$ref", "only local references (\"#\", \"#/$defs/...\") are supported");
      std::string target = ref.get<std::string>().substr(1);
      if (!target.empty() && target[0] != '/')
        fail(pointer, "$ref", "only JSON-pointer references are supported");
      b_.add_call(from, rule_for_pointer(target), to);
      return;
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key))
        continue;
      only(key, {});
      const json& alts = s[key];
      if (!alts.is_array() || alts.empty())
        fail(pointer, key, std::string(key) + " must be a non-empty array of schemas");
      for (size_t i = 0; i < alts.size(); ++i)
        b_.add_call(from, rule_for(alts[i], pointer + "/" + key + "/" + std::to_string(i)), to);
      return;
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string())
            fail(pointer, "type", "type must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(pointer, "type", "type must be a string or an array of strings");
      }
      for (const auto& ty : types)
        if (ty != "object" && ty != "array" && ty != "string" && ty != "number" &&
            ty != "integer" && ty != "boolean" && ty != "null")
          fail(pointer, "type", "unknown type '" + ty + "'");
    }
    if (s.contains("enum") || s.contains("const")) {
      const char* key = s.contains("enum") ? "enum" : "const";
      only(key, {"type"});
      if (s.contains("enum") && s.contains("const"))
        fail(pointer, "const", "enum and const together are not supported");
      json values = s[key];
      if (std::string(key) == "const")
        values = json::array({values});
      if (!values.is_array() || values.empty())
        fail(pointer, key, "enum must be a non-empty array");
      size_t emitted = 0;
      for (const auto& v : values) {
        if (!types.empty() && !value_has_type(v, types))
          continue;
        b_.add_literal(from, v.dump(), to);
        ++emitted;
      }
      if (emitted == 0)
        fail(pointer, key, "no enum value has the schema's type");
      return;
    }
    if (types.empty()) {
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
        types.push_back("object");
      else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems"))
        types.push_back("array");
      else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") ||
               s.contains("maxLength"))
        types.push_back("string");
    }
    if (types.empty()) {
      b_.add_call(from, any_value_rule(), to);
      return;
    }
    for (const auto& ty : types) {
      if (ty == "null") {
        b_.add_literal(from, "null", to);
      } else if (ty == "boolean") {
        b_.add_literal(from, "true", to);
        b_.add_literal(from, "false", to);
      } else if (ty == "integer" || ty == "number") {
        emit_number(from, to, ty == "integer");
      } else if (ty == "string") {
        int min = bound(s, pointer, "minLength", 0);
        int max = bound(s, pointer, "maxLength", -1);
        if (max != -1 && max < min)
          fail(pointer, "maxLength", "maxLength is below minLength");
        char_dfa dfa;
        if (s.contains("format")) {
          if (!s["format"].is_string() || format_pattern(s["format"].get<std::string>()) == nullptr)
            fail(pointer, "format",
                 "unsupported format " + s["format"].dump() +
                     " (supported: date, time, date-time, uuid, email, ipv4)");
          if (s.contains("pattern"))
            fail(pointer, "format", "format together with pattern is not supported");
          std::string err;
          if (!compile_pattern(format_pattern(s["format"].get<std::string>()), dfa, err))
            fail(pointer, "format", err);
        } else if (s.contains("pattern")) {
          if (!s["pattern"].is_string())
            fail(pointer, "pattern", "pattern must be a string");
          std::string err;
          if (!compile_pattern(s["pattern"].get<std::string>(), dfa, err))
            fail(pointer, "pattern", err);
        } else {
          dfa = any_string_dfa();
        }
        emit_string(from, to, dfa, min, max);
      } else if (ty == "array") {
        int min = bound(s, pointer, "minItems", 0);
        int max = bound(s, pointer, "maxItems", -1);
        if (max != -1 && max < min)
          fail(pointer, "maxItems", "maxItems is below minItems");
        uint32_t item = s.contains("items") ? rule_for(s["items"], pointer + "/items")
                                            : any_value_rule();
        if (s.contains("items") && s["items"].is_array())
          fail(pointer + "/items", "items", "tuple items (an array) are not supported");
        emit_array(from, to, item, min, max);
      } else {
        emit_object_schema(from, to, s, pointer);
      }
    }
  }

  static bool value_has_type(const json& v, const std::vector<std::string>& types) {
    for (const auto& t : types) {
      if ((t == "null" && v.is_null()) || (t == "boolean" && v.is_boolean()) ||
          (t == "string" && v.is_string()) || (t == "array" && v.is_array()) ||
          (t == "object" && v.is_object()) || (t == "number" && v.is_number()) ||
          (t == "integer" && (v.is_number_integer() ||
                              (v.is_number_float() && v.get<double>() == static_cast<double>(
                                                                             static_cast<long long>(v.get<double>()))))))
        return true;
    }
    return false;
  }

  void emit_object_schema(uint32_t from, uint32_t to, const json& s, const std::string& pointer) {
    std::vector<property> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array())
        fail(pointer, "required", "required must be an array of strings");
      for (const auto& x : r) {
        if (!x.is_string())
          fail(pointer, "required", "required must be an array of strings");
        required.insert(x.get<std::string>());
      }
    }
    std::set<std::string> listed;
    if (s.contains("properties")) {
      const json& p = s["properties"];
      if (!p.is_object())
        fail(pointer, "properties", "properties must be an object");
      for (const auto& [name, sub] : p.items()) {
        std::string ptr = pointer + "/properties/" + escape_pointer(name);
        props.push_back({name, rule_for(sub, ptr), required.count(name) > 0});
        listed.insert(name);
      }
    }
    uint32_t additional = no_node;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a.is_boolean())
        additional = a.get<bool>() ? any_value_rule() : no_node;
      else
        additional = rule_for(a, pointer + "/additionalProperties");
    } else {
      additional = any_value_rule();
    }
    for (const auto& name : required) {
      if (listed.count(name))
        continue;
      if (additional == no_node)
        fail(pointer, "required",
             "required property '" + name + "' is not allowed (additionalProperties is false)");
      props.push_back({name, additional, true});
      listed.insert(name);
    }
    emit_object(from, to, props, additional);
  }

  void emit_object(uint32_t from, uint32_t to, const std::vector<property>& props,
                   uint32_t additional) {
    uint32_t rule = b_.rule_of(from);
    size_t n = props.size();
    // state[i][e]: properties before i decided; e = something emitted.
    std::vector<std::array<uint32_t, 2>> state(n + 1);
    for (auto& st : state)
      st = {b_.add_node(rule), b_.add_node(rule)};
    uint32_t open = b_.add_node(rule);
    b_.add_bytes(from, '{', '{', open);
    b_.add_epsilon(ws(open), state[0][0]);
    auto member = [&](uint32_t at, bool after_other, const std::function<uint32_t(uint32_t)>& key,
                      uint32_t value_rule, uint32_t dest) {
      uint32_t cur = after_other ? punct(at, ',') : at;
      cur = key(cur);
      cur = punct(cur, ':');
      b_.add_call(cur, value_rule, dest);
    };
    for (size_t i = 0; i < n; ++i) {
      check_size("properties");
      std::string key_text = json(props[i].name).dump();
      for (int e = 0; e < 2; ++e) {
        if (!props[i].required)
          b_.add_epsilon(state[i][e], state[i + 1][e]);
        member(
            state[i][e], e == 1,
            [&](uint32_t at) {
              uint32_t k = b_.add_node(rule);
              b_.add_literal(at, key_text, k);
              return k;
            },
            props[i].rule, state[i + 1][1]);
      }
    }
    if (additional != no_node) {
      std::vector<std::string> names;
      for (const auto& p : props)
        names.push_back(p.name);
      char_dfa keys = any_string_except(names);
      for (int e = 0; e < 2; ++e)
        member(
            state[n][e], e == 1,
            [&](uint32_t at) {
              uint32_t k = b_.add_node(rule);
              emit_string(at, k, keys, 0, -1);
              return k;
            },
            additional, state[n][1]);
    }
    for (int e = 0; e < 2; ++e) {
      uint32_t w = ws(state[n][e]);
      b_.add_bytes(w, '}', '}', to);
    }
  }

  void emit_array(uint32_t from, uint32_t to, uint32_t item, int min, int max) {
    uint32_t rule = b_.rule_of(from);
    uint32_t open = b_.add_node(rule);
    b_.add_bytes(from, '[', '[', open);
    uint32_t first = ws(open);
    uint32_t close = b_.add_node(rule);
    b_.add_bytes(close, ']', ']', to);
    if (min == 0)
      b_.add_epsilon(first, close);
    if (max == 0)
      return;
    // after[k]: k items written.
    uint32_t cur = b_.add_node(rule);
    b_.add_call(first, item, cur);
    int unrolled = std::max(min, 1);
    if (max != -1)
      unrolled = max;
    for (int k = 1;; ++k) {
      check_size("maxItems");
      if (k >= min)
        b_.add_epsilon(ws(cur), close);
      if (k == unrolled) {
        if (max == -1)
          b_.add_call(punct(cur, ','), item, cur);
        break;
      }
      uint32_t next = b_.add_node(rule);
      b_.add_call(punct(cur, ','), item, next);
      cur = next;
    }
  }

  // from --[0-9]{min,max}--> to
  void digits(uint32_t from, uint32_t to, int min, int max) {
    uint32_t rule = b_.rule_of(from);
    uint32_t cur = from;
    for (int k = 1; k <= max; ++k) {
      uint32_t next = b_.add_node(rule);
      b_.add_bytes(cur, '0', '9', next);
      if (k >= min)
        b_.add_epsilon(next, to);
      cur = next;
    }
  }

  void emit_number(uint32_t from, uint32_t to, bool integer) {
    uint32_t rule = b_.rule_of(from);
    int max_digits = std::max(1, opts_.max_number_digits);
    uint32_t sign = b_.add_node(rule);
    b_.add_epsilon(from, sign);
    b_.add_bytes(from, '-', '-', sign);
    uint32_t int_end = b_.add_node(rule);
    b_.add_bytes(sign, '0', '0', int_end);
    uint32_t lead = b_.add_node(rule);
    b_.add_bytes(sign, '1', '9', lead);
    b_.add_epsilon(lead, int_end);
    digits(lead, int_end, 1, max_digits - 1);
    b_.add_epsilon(int_end, to);
    if (integer)
      return;
    uint32_t dot = b_.add_node(rule);
    b_.add_bytes(int_end, '.', '.', dot);
    uint32_t mantissa = b_.add_node(rule);
    b_.add_epsilon(int_end, mantissa);
    digits(dot, mantissa, 1, max_digits);
    b_.add_epsilon(mantissa, to);
    uint32_t e = b_.add_node(rule);
    b_.add_bytes(mantissa, 'e', 'e', e);
    b_.add_bytes(mantissa, 'E', 'E', e);
    uint32_t esign = b_.add_node(rule);
    b_.add_epsilon(e, esign);
    b_.add_bytes(e, '+', '+', esign);
    b_.add_bytes(e, '-', '-', esign);
    digits(esign, to, 1, 2);
  }

  // One JSON-string character of `set`, canonically encoded, from a to b.
  void emit_char(uint32_t a, const char_set& set, uint32_t b) {
    uint32_t rule = b_.rule_of(a);
    char_set special = char_set::range(0, 0x1F);
    special.add('"', '"');
    special.add('\\', '\\');
    char_set raw = set.intersect(special.complement());
    utf8_sequences(raw, [&](const byte_range* seq, size_t n) {
      uint32_t cur = a;
      for (size_t i = 0; i < n; ++i) {
        uint32_t next = i + 1 == n ? b : b_.add_node(rule);
        b_.add_bytes(cur, seq[i].lo, seq[i].hi, next);
        cur = next;
      }
    });
    char_set esc = set.intersect(special);
    if (esc.empty())
      return;
    uint32_t back = b_.add_node(rule);
    b_.add_bytes(a, '\\', '\\', back);
    uint32_t u00 = no_node;
    for (const auto& r : esc.ranges()) {
      for (uint32_t c = r.lo; c <= r.hi; ++c) {
        char short_form = c == '"' ? '"' : c == '\\' ? '\\' : c == '\b' ? 'b' : c == '\f' ? 'f'
                        : c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : 0;
        if (short_form != 0) {
          b_.add_bytes(back, static_cast<uint8_t>(short_form), static_cast<uint8_t>(short_form), b);
          continue;
        }
        if (u00 == no_node) {
          u00 = b_.add_node(rule);
          b_.add_literal(back, "u00", u00);
        }
        const char* hex = "0123456789abcdef";
        char text[2] = {hex[c >> 4], hex[c & 0xF]};
        b_.add_literal(u00, std::string_view(text, 2), b);
      }
    }
  }

  void emit_string(uint32_t from, uint32_t to, const char_dfa& dfa, int min, int max) {
    uint32_t rule = b_.rule_of(from);
    uint32_t open = b_.add_node(rule);
    b_.add_bytes(from, '"', '"', open);
    uint32_t close = b_.add_node(rule);
    b_.add_bytes(close, '"', '"', to);
    // Product of the DFA with a character counter (saturating at min when
    // there is no max).
    std::map<std::pair<uint32_t, int>, uint32_t> ids;
    std::vector<std::pair<uint32_t, int>> queue;
    auto intern = [&](uint32_t d, int count) {
      auto [it, fresh] = ids.emplace(std::make_pair(d, count), 0);
      if (fresh) {
        it->second = queue.empty() ? open : b_.add_node(rule);
        queue.emplace_back(d, count);
      }
      return it->second;
    };
    intern(dfa.start, 0);
    for (size_t qi = 0; qi < queue.size(); ++qi) {
      check_size("maxLength");
      auto [d, count] = queue[qi];
      uint32_t node = ids.at({d, count});
      if (dfa.accepting[d] && count >= min)
        b_.add_epsilon(node, close);
      if (max != -1 && count >= max)
        continue;
      int next_count = max == -1 ? std::min(count + 1, min) : count + 1;
      for (const auto& e : dfa.edges[d])
        emit_char(node, e.set, intern(e.to, next_count));
    }
  }

  const json& root_;
  json_grammar_options opts_;
  grammar_builder b_;
  std::map<std::string, uint32_t> memo_;
  uint32_t any_value_ = no_node;
  uint32_t any_object_ = no_node;
};

json_grammar_result finish(compiler& c, uint32_t root, const json_grammar_options& options) {
  json_grammar_result r;
  r.value = c.builder().finalize(root, options.limits, r.error);
  return r;
}

} // namespace

json_grammar_result compile_json_schema(const nlohmann::ordered_json& schema,
                                        const json_grammar_options& options) {
  compiler c(schema, options);
  try {
    uint32_t root = c.rule_for_pointer("");
    return finish(c, root, options);
  } catch (const schema_failure& f) {
    return {nullptr, f.error};
  }
}

json_grammar_result compile_json_object_mode(const json_grammar_options& options) {
  nlohmann::ordered_json empty = nlohmann::ordered_json::object();
  compiler c(empty, options);
  try {
    uint32_t root = c.any_object_rule();
    return finish(c, root, options);
  } catch (const schema_failure& f) {
    return {nullptr, f.error};
  }
}

} // namespace tessera::engine::grammar

namespace tessera::engine::grammar {

json_grammar_result compile_json_schema_text(std::string_view schema_text,
                                             const json_grammar_options& options) {
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(schema_text);
  } catch (const nlohmann::json::exception& e) {
    return {nullptr, {"", "", std::string("the schema is not valid JSON: ") + e.what()}};
  }
  return compile_json_schema(schema, options);
}

} // namespace tessera::engine::grammar
