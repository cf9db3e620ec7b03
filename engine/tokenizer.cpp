#include "engine/tokenizer.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "engine/bpe_tokenizer.hpp"
#include "engine/engine_errc.hpp"
#include "engine/model_config.hpp"
#include "engine/read_file.hpp"
#include "engine/sp_tokenizer.hpp"
#include "engine/utf8.hpp"

namespace tessera::engine {

namespace {

using json = nlohmann::json;

/// Reads an optional JSON file: nullopt if absent, an error if unreadable
/// or malformed (engine_errc::bad_config naming the file).
caf::expected<std::optional<json>> read_optional_json(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    return std::optional<json>{};
  auto text = read_file_text(file);
  if (!text)
    return std::move(text.error());
  try {
    auto j = json::parse(*text);
    if (!j.is_object())
      return make_engine_error(engine_errc::bad_config, file.string() + ": not a JSON object");
    return std::optional<json>{std::move(j)};
  } catch (const json::exception& e) {
    return make_engine_error(engine_errc::bad_config,
                             file.string() + ": not valid JSON: " + e.what());
  }
}

/// Applies the settings one JSON file gives; `where` names it in errors.
/// Does not throw: every access checks the type first.
class settings_reader {
public:
  settings_reader(const tokenizer& tok, tokenizer_settings& out) : tok_(tok), out_(out) {}

  /// generation_config.json: bos_token_id, eos_token_id (int or list),
  /// pad_token_id.
  [[nodiscard]] caf::error read_generation_config(const json& j, const std::string& where) {
    if (auto err = read_id(j, "bos_token_id", where, out_.bos_id))
      return err;
    if (auto err = read_id(j, "pad_token_id", where, out_.pad_id))
      return err;
    auto it = j.find("eos_token_id");
    if (it == j.end() || it->is_null())
      return {};
    if (it->is_array()) {
      for (const auto& e : *it)
        if (auto err = add_eos(e, where))
          return err;
      return {};
    }
    return add_eos(*it, where);
  }

  /// tokenizer_config.json: bos_token / eos_token / pad_token (string or
  /// {"content": ...}), add_bos_token, chat_template (string or a list of
  /// {name, template}).
  [[nodiscard]] caf::error read_tokenizer_config(const json& j, const std::string& where,
                                                 bool& add_bos_given) {
    std::optional<int32_t> id;
    if (auto err = read_token(j, "bos_token", where, id))
      return err;
    if (id)
      out_.bos_id = id;
    id.reset();
    if (auto err = read_token(j, "eos_token", where, id))
      return err;
    if (id)
      add_unique(*id);
    id.reset();
    if (auto err = read_token(j, "pad_token", where, id))
      return err;
    if (id)
      out_.pad_id = id;
    if (auto it = j.find("add_bos_token"); it != j.end() && !it->is_null()) {
      if (!it->is_boolean())
        return bad(where, "'add_bos_token' is not a boolean");
      out_.add_bos = it->get<bool>();
      add_bos_given = true;
    }
    if (auto it = j.find("chat_template"); it != j.end() && !it->is_null()) {
      if (it->is_string()) {
        out_.chat_template = it->get<std::string>();
      } else if (it->is_array()) {
        const json* chosen = nullptr;
        for (const auto& t : *it) {
          if (!t.is_object() || !t.contains("template") || !t["template"].is_string())
            return bad(where, "'chat_template' list entry lacks a string 'template'");
          bool is_default = t.contains("name") && t["name"] == "default";
          if (chosen == nullptr || is_default)
            chosen = &t;
          if (is_default)
            break;
        }
        if (chosen != nullptr)
          out_.chat_template = (*chosen)["template"].get<std::string>();
      } else {
        return bad(where, "'chat_template' is neither a string nor a list");
      }
    }
    return {};
  }

  void add_unique(int32_t id) {
    if (std::find(out_.eos_ids.begin(), out_.eos_ids.end(), id) == out_.eos_ids.end())
      out_.eos_ids.push_back(id);
  }

private:
  static caf::error bad(const std::string& where, const std::string& what) {
    return make_engine_error(engine_errc::bad_config, where + ": " + what);
  }

  static caf::error read_id(const json& j, const char* key, const std::string& where,
                            std::optional<int32_t>& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
      return {};
    if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
        it->get<int64_t>() > INT32_MAX)
      return bad(where, std::string{"'"} + key + "' is not a token id: " + it->dump());
    out = static_cast<int32_t>(it->get<int64_t>());
    return {};
  }

  caf::error add_eos(const json& e, const std::string& where) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX)
      return bad(where, "'eos_token_id' holds a non-id: " + e.dump());
    add_unique(static_cast<int32_t>(e.get<int64_t>()));
    return {};
  }

  caf::error read_token(const json& j, const char* key, const std::string& where,
                        std::optional<int32_t>& out) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
      return {};
    const json* content = &*it;
    if (it->is_object()) {
      auto c = it->find("content");
      if (c == it->end())
        return bad(where, std::string{"'"} + key + "' object lacks 'content'");
      content = &*c;
    }
    if (!content->is_string())
      return bad(where, std::string{"'"} + key + "' is neither a string nor {\"content\": ...}");
    auto text = content->get<std::string>();
    auto id = tok_.token_to_id(text);
    if (!id)
      return bad(where, std::string{"'"} + key + "' '" + text + "' is not a token of the tokenizer");
    out = id;
    return {};
  }

  const tokenizer& tok_;
  tokenizer_settings& out_;
};

/// Merges config.json, generation_config.json, tokenizer_config.json and
/// chat_template.jinja. BOS / PAD: later files win. EOS: the union, in
/// order of appearance, since any of them ends generation.
caf::expected<tokenizer_settings> read_settings(const std::filesystem::path& dir,
                                                const model_config& cfg, const tokenizer& tok,
                                                tokenizer_settings defaults) {
  tokenizer_settings s = std::move(defaults);
  if (cfg.bos_token_id)
    s.bos_id = cfg.bos_token_id;
  settings_reader reader{tok, s};
  for (auto id : cfg.eos_token_ids)
    reader.add_unique(id);

  auto gen_file = dir / "generation_config.json";
  auto gen = read_optional_json(gen_file);
  if (!gen)
    return std::move(gen.error());
  if (*gen)
    if (auto err = reader.read_generation_config(**gen, gen_file.string()))
      return err;

  bool add_bos_given = false;
  auto tc_file = dir / "tokenizer_config.json";
  auto tc = read_optional_json(tc_file);
  if (!tc)
    return std::move(tc.error());
  if (*tc)
    if (auto err = reader.read_tokenizer_config(**tc, tc_file.string(), add_bos_given))
      return err;
  if (!add_bos_given)
    s.add_bos = s.bos_id.has_value();

  // Newer transformers save the template beside tokenizer_config.json.
  auto jinja = dir / "chat_template.jinja";
  std::error_code ec;
  if (s.chat_template.empty() && std::filesystem::exists(jinja, ec)) {
    auto text = read_file_text(jinja);
    if (!text)
      return std::move(text.error());
    s.chat_template = std::move(*text);
  }
  return s;
}

template <class Tokenizer>
caf::expected<std::unique_ptr<tokenizer>> finish_loading(std::unique_ptr<Tokenizer> tok,
                                                         const std::filesystem::path& dir,
                                                         const model_config& cfg,
                                                         tokenizer_settings defaults) {
  auto settings = read_settings(dir, cfg, *tok, std::move(defaults));
  if (!settings)
    return std::move(settings.error());
  tok->set_settings(std::move(*settings));
  return std::unique_ptr<tokenizer>{std::move(tok)};
}

caf::expected<std::unique_ptr<tokenizer>> load_sp(const std::filesystem::path& dir,
                                                  const model_config& cfg) {
  auto sp = sp_tokenizer::load(dir / "tokenizer.model");
  if (!sp)
    return std::move(sp.error());
  // The model's own BOS/EOS are the defaults the JSON files refine.
  tokenizer_settings defaults;
  defaults.bos_id = (*sp)->model_bos_id();
  if (auto eos = (*sp)->model_eos_id(); eos && cfg.eos_token_ids.empty())
    defaults.eos_ids.push_back(*eos);
  return finish_loading(std::move(*sp), dir, cfg, std::move(defaults));
}

} // namespace

caf::expected<std::unique_ptr<tokenizer>> load_tokenizer(const std::filesystem::path& dir,
                                                         const model_config& cfg) {
  std::error_code ec;
  auto json_file = dir / "tokenizer.json";
  auto model_file = dir / "tokenizer.model";
  bool has_json = std::filesystem::exists(json_file, ec);
  bool has_model = std::filesystem::exists(model_file, ec);
  if (has_json) {
    auto bpe = bpe_tokenizer::load(json_file);
    if (bpe)
      return finish_loading(std::move(*bpe), dir, cfg, {});
    // Llama 2 / Mistral folders ship a converted (byte-fallback) BPE
    // tokenizer.json beside the tokenizer.model it came from.
    if (!has_model)
      return std::move(bpe.error());
    spdlog::warn("{}; using tokenizer.model instead", error_message(bpe.error()));
  }
  if (has_model)
    return load_sp(dir, cfg);
  return make_engine_error(engine_errc::io_error,
                           dir.string() + ": no tokenizer.json or tokenizer.model");
}

std::string_view tokenizer::begin_encode(std::string_view text, bool add_bos,
                                         std::vector<int32_t>& out, std::string& storage) const {
  if (add_bos && settings_.bos_id)
    out.push_back(*settings_.bos_id);
  if (utf8_is_valid(text))
    return text;
  storage = utf8_sanitize(text);
  return storage;
}

} // namespace tessera::engine
