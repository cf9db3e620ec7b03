#include "engine/model_config.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "engine/engine_errc.hpp"

namespace tessera::engine {

namespace {

using nlohmann::json;

// Upper bounds that keep a hostile or mistyped config from asking for absurd
// allocations; each is well above any published Llama-family model.
constexpr int64_t max_vocab_size = int64_t{1} << 24;
constexpr int64_t max_hidden_size = 65536;
constexpr int64_t max_intermediate_size = int64_t{1} << 20;
constexpr int64_t max_layers = 1024;
constexpr int64_t max_heads = 1024;
constexpr int64_t max_head_dim = 1024;
constexpr int64_t max_positions = int64_t{1} << 24;
constexpr size_t max_config_bytes = size_t{16} << 20;

std::string describe(const json& j) {
  if (j.is_number_float())
    return "a non-integer number";
  if (j.is_number())
    return "an integer";
  if (j.is_array() || j.is_object())
    return std::string{"an "} + j.type_name();
  return std::string{"a "} + j.type_name();
}

/// Reads typed fields of one JSON object, producing errors that name the
/// field and the file.
class field_reader {
public:
  field_reader(const json& obj, std::string_view source, std::string prefix = {})
    : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  [[nodiscard]] const json* get(const char* key) const {
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }

  /// A present, non-null value; nullptr when absent or null.
  [[nodiscard]] const json* get_non_null(const char* key) const {
    auto* j = get(key);
    return j == nullptr || j->is_null() ? nullptr : j;
  }

  [[nodiscard]] caf::error missing(const char* key) const {
    return make_engine_error(engine_errc::bad_config,
                             std::string{source_} + ": missing field '" + name(key) + "'");
  }

  [[nodiscard]] caf::error wrong_type(const char* key, const json& j, const char* want) const {
    return make_engine_error(engine_errc::bad_config,
                             std::string{source_} + ": field '" + name(key) + "' must be " +
                               want + ", got " + describe(j));
  }

  /// Reads an integer in [lo, hi]. Leaves `out` alone when absent (or null)
  /// and not required.
  [[nodiscard]] caf::error read_int(const char* key, int32_t& out, bool required, int64_t lo,
                                    int64_t hi) const {
    auto* j = get_non_null(key);
    if (j == nullptr)
      return required ? missing(key) : caf::error{};
    int64_t v = 0;
    if (j->is_number_unsigned()) {
      auto u = j->get<uint64_t>();
      v = u > static_cast<uint64_t>(hi) ? hi + 1 : static_cast<int64_t>(u);
    } else if (j->is_number_integer()) {
      v = j->get<int64_t>();
    } else {
      return wrong_type(key, *j, "an integer");
    }
    if (v < lo || v > hi)
      return make_engine_error(engine_errc::bad_config,
                               std::string{source_} + ": field '" + name(key) + "' is " +
                                 j->dump() + ", must be between " + std::to_string(lo) +
                                 " and " + std::to_string(hi));
    out = static_cast<int32_t>(v);
    return {};
  }

  /// Reads a finite number greater than zero (and below `hi`).
  [[nodiscard]] caf::error read_positive_float(const char* key, float& out, bool required,
                                               double hi) const {
    auto* j = get_non_null(key);
    if (j == nullptr)
      return required ? missing(key) : caf::error{};
    if (!j->is_number())
      return wrong_type(key, *j, "a number");
    auto v = j->get<double>();
    if (!std::isfinite(v) || v <= 0.0 || v > hi)
      return make_engine_error(engine_errc::bad_config,
                               std::string{source_} + ": field '" + name(key) + "' is " +
                                 j->dump() + ", must be positive and at most " +
                                 json(hi).dump());
    out = static_cast<float>(v);
    return {};
  }

  [[nodiscard]] caf::error read_bool(const char* key, bool& out) const {
    auto* j = get_non_null(key);
    if (j == nullptr)
      return {};
    if (!j->is_boolean())
      return wrong_type(key, *j, "true or false");
    out = j->get<bool>();
    return {};
  }

  [[nodiscard]] caf::error read_string(const char* key, std::string& out, bool required) const {
    auto* j = get_non_null(key);
    if (j == nullptr)
      return required ? missing(key) : caf::error{};
    if (!j->is_string())
      return wrong_type(key, *j, "a string");
    out = j->get<std::string>();
    return {};
  }

  [[nodiscard]] std::string name(const char* key) const { return prefix_ + key; }

private:
  const json& obj_;
  std::string_view source_;
  std::string prefix_;
};

#define TESSERA_TRY(expr)                                                                      \
  do {                                                                                         \
    if (auto err_ = (expr))                                                                    \
      return err_;                                                                             \
  } while (false)

caf::error read_rope_scaling(const field_reader& top, std::string_view source,
                             rope_scaling_config& out) {
  auto* j = top.get_non_null("rope_scaling");
  if (j == nullptr)
    return {};
  if (!j->is_object())
    return top.wrong_type("rope_scaling", *j, "an object or null");
  field_reader r{*j, source, "rope_scaling."};
  std::string type;
  if (r.get_non_null("rope_type") != nullptr)
    TESSERA_TRY(r.read_string("rope_type", type, true));
  else
    TESSERA_TRY(r.read_string("type", type, true));
  if (type == "default")
    return {};
  if (type != "linear" && type != "llama3")
    return make_engine_error(engine_errc::unsupported,
                             std::string{source} + ": unsupported rope_scaling type '" + type +
                               "' (supported: default, linear, llama3)");
  out.type = type;
  TESSERA_TRY(r.read_positive_float("factor", out.factor, true, 1e6));
  if (type == "llama3") {
    TESSERA_TRY(r.read_positive_float("low_freq_factor", out.low_freq_factor, true, 1e6));
    TESSERA_TRY(r.read_positive_float("high_freq_factor", out.high_freq_factor, true, 1e6));
    TESSERA_TRY(r.read_int("original_max_position_embeddings",
                           out.original_max_position_embeddings, true, 1, max_positions));
    if (out.high_freq_factor <= out.low_freq_factor)
      return make_engine_error(engine_errc::bad_config,
                               std::string{source} +
                                 ": rope_scaling.high_freq_factor must exceed low_freq_factor");
  }
  return {};
}

caf::error read_token_ids(const field_reader& r, std::string_view source, model_config& cfg) {
  auto check_id = [&](const char* key, const json& v) -> caf::expected<int32_t> {
    if (!v.is_number_integer())
      return r.wrong_type(key, v, "a token id (integer)");
    auto id = v.get<int64_t>();
    if (id < 0 || id >= cfg.vocab_size)
      return make_engine_error(engine_errc::bad_config,
                               std::string{source} + ": field '" + key + "' holds token id " +
                                 std::to_string(id) + ", outside the vocabulary [0, " +
                                 std::to_string(cfg.vocab_size) + ")");
    return static_cast<int32_t>(id);
  };
  if (auto* j = r.get_non_null("bos_token_id")) {
    auto id = check_id("bos_token_id", *j);
    if (!id)
      return id.error();
    cfg.bos_token_id = *id;
  }
  if (auto* j = r.get_non_null("eos_token_id")) {
    if (j->is_array()) {
      for (auto& v : *j) {
        auto id = check_id("eos_token_id", v);
        if (!id)
          return id.error();
        cfg.eos_token_ids.push_back(*id);
      }
    } else {
      auto id = check_id("eos_token_id", *j);
      if (!id)
        return id.error();
      cfg.eos_token_ids.push_back(*id);
    }
  }
  return {};
}

caf::error read_fields(const json& doc, std::string_view source, model_config& cfg) {
  field_reader r{doc, source};
  TESSERA_TRY(r.read_string("model_type", cfg.model_type, true));
  if (cfg.model_type != "llama" && cfg.model_type != "mistral" && cfg.model_type != "qwen2")
    return make_engine_error(engine_errc::unsupported,
                             std::string{source} + ": unsupported model_type '" +
                               cfg.model_type + "' (supported: llama, mistral, qwen2)");
  TESSERA_TRY(r.read_int("vocab_size", cfg.vocab_size, true, 1, max_vocab_size));
  TESSERA_TRY(r.read_int("hidden_size", cfg.hidden_size, true, 1, max_hidden_size));
  TESSERA_TRY(
    r.read_int("intermediate_size", cfg.intermediate_size, true, 1, max_intermediate_size));
  TESSERA_TRY(r.read_int("num_hidden_layers", cfg.num_hidden_layers, true, 1, max_layers));
  TESSERA_TRY(r.read_int("num_attention_heads", cfg.num_attention_heads, true, 1, max_heads));
  cfg.num_key_value_heads = cfg.num_attention_heads;
  TESSERA_TRY(r.read_int("num_key_value_heads", cfg.num_key_value_heads, false, 1, max_heads));
  cfg.head_dim = 0;
  TESSERA_TRY(r.read_int("head_dim", cfg.head_dim, false, 1, max_head_dim));
  TESSERA_TRY(
    r.read_int("max_position_embeddings", cfg.max_position_embeddings, false, 1, max_positions));
  TESSERA_TRY(r.read_positive_float("rms_norm_eps", cfg.rms_norm_eps, false, 1.0));
  TESSERA_TRY(r.read_positive_float("rope_theta", cfg.rope_theta, false, 1e12));
  TESSERA_TRY(read_rope_scaling(r, source, cfg.rope_scaling));
  TESSERA_TRY(r.read_bool("tie_word_embeddings", cfg.tie_word_embeddings));
  TESSERA_TRY(r.read_bool("attention_bias", cfg.attention_bias));
  if (cfg.model_type == "qwen2")
    cfg.attention_bias = true; // Qwen2's q/k/v projections always carry a bias

  bool mlp_bias = false;
  TESSERA_TRY(r.read_bool("mlp_bias", mlp_bias));
  if (mlp_bias)
    return make_engine_error(engine_errc::unsupported,
                             std::string{source} + ": mlp_bias true is not supported");
  std::string act = "silu";
  TESSERA_TRY(r.read_string("hidden_act", act, false));
  if (act != "silu")
    return make_engine_error(engine_errc::unsupported,
                             std::string{source} + ": unsupported hidden_act '" + act +
                               "' (supported: silu)");

  // Newer transformers write "dtype"; older ones "torch_dtype".
  const char* dtype_key = r.get_non_null("torch_dtype") ? "torch_dtype" : "dtype";
  std::string dtype_name;
  TESSERA_TRY(r.read_string(dtype_key, dtype_name, false));
  if (!dtype_name.empty()) {
    auto t = parse_dtype(dtype_name);
    if (!t)
      return make_engine_error(engine_errc::unsupported,
                               std::string{source} + ": unsupported " + dtype_key + " '" +
                                 dtype_name + "' (supported: float32, float16, bfloat16)");
    cfg.torch_dtype = *t;
  }
  TESSERA_TRY(read_token_ids(r, source, cfg));

  // Cross-field checks.
  auto fail = [&](std::string what) {
    return make_engine_error(engine_errc::bad_config, std::string{source} + ": " + what);
  };
  if (cfg.num_key_value_heads > cfg.num_attention_heads ||
      cfg.num_attention_heads % cfg.num_key_value_heads != 0)
    return fail("num_attention_heads (" + std::to_string(cfg.num_attention_heads) +
                ") is not a multiple of num_key_value_heads (" +
                std::to_string(cfg.num_key_value_heads) + ")");
  if (cfg.head_dim == 0) {
    if (cfg.hidden_size % cfg.num_attention_heads != 0)
      return fail("hidden_size (" + std::to_string(cfg.hidden_size) +
                  ") is not divisible by num_attention_heads (" +
                  std::to_string(cfg.num_attention_heads) + ") and no head_dim is given");
    cfg.head_dim = cfg.hidden_size / cfg.num_attention_heads;
  }
  if (cfg.head_dim % 2 != 0)
    return fail("head_dim (" + std::to_string(cfg.head_dim) +
                ") must be even: RoPE rotates pairs of dimensions");
  if (int64_t{cfg.num_attention_heads} * cfg.head_dim > max_hidden_size)
    return fail("num_attention_heads * head_dim exceeds " + std::to_string(max_hidden_size));
  return {};
}

#undef TESSERA_TRY

/// The shortest decimal that reads back as `f`, as a double, so that
/// config.json says 1e-05 rather than 9.999999747378752e-06.
double shortest(float f) {
  std::array<char, 64> buf{};
  auto res = std::to_chars(buf.data(), buf.data() + buf.size(), f);
  *res.ptr = '\0';
  return std::strtod(buf.data(), nullptr);
}

std::string_view architecture_of(const std::string& model_type) {
  if (model_type == "mistral")
    return "MistralForCausalLM";
  if (model_type == "qwen2")
    return "Qwen2ForCausalLM";
  return "LlamaForCausalLM";
}

std::string_view torch_dtype_name(dtype t) {
  switch (t) {
    case dtype::f32: return "float32";
    case dtype::f16: return "float16";
    case dtype::bf16: return "bfloat16";
    case dtype::i8: return "int8";
  }
  return "bfloat16";
}

} // namespace

int64_t model_config::parameter_count() const {
  const int64_t h = hidden_size;
  const int64_t q_out = int64_t{num_attention_heads} * head_dim;
  const int64_t kv_out = int64_t{num_key_value_heads} * head_dim;
  int64_t per_layer = 2 * h                        // the two norms
                      + q_out * h + 2 * kv_out * h // q, k, v
                      + h * q_out                  // o
                      + 3 * h * intermediate_size; // gate, up, down
  if (attention_bias)
    per_layer += q_out + 2 * kv_out;
  int64_t embed = int64_t{vocab_size} * h;
  return embed + (tie_word_embeddings ? 0 : embed) + h + per_layer * num_hidden_layers;
}

caf::expected<model_config> parse_model_config(std::string_view json_text,
                                               std::string_view source) {
  json doc;
  try {
    doc = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    return make_engine_error(engine_errc::bad_config,
                             std::string{source} + ": malformed JSON at byte " +
                               std::to_string(e.byte) + ": " + e.what());
  }
  if (!doc.is_object())
    return make_engine_error(engine_errc::bad_config,
                             std::string{source} + ": expected a JSON object, got " +
                               describe(doc));
  model_config cfg;
  try {
    if (auto err = read_fields(doc, source, cfg))
      return err;
  } catch (const json::exception& e) { // defensive: the reader checks types first
    return make_engine_error(engine_errc::bad_config, std::string{source} + ": " + e.what());
  }
  return cfg;
}

caf::expected<model_config> load_model_config(const std::filesystem::path& dir) {
  auto path = dir / "config.json";
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return make_engine_error(engine_errc::io_error,
                             path.string() + ": cannot open: " +
                               std::generic_category().message(errno));
  std::string text;
  std::array<char, 65536> buf{};
  while (in.read(buf.data(), buf.size()) || in.gcount() > 0) {
    text.append(buf.data(), static_cast<size_t>(in.gcount()));
    if (text.size() > max_config_bytes)
      return make_engine_error(engine_errc::bad_config,
                               path.string() + ": larger than " +
                                 std::to_string(max_config_bytes) + " bytes");
  }
  if (in.bad())
    return make_engine_error(engine_errc::io_error, path.string() + ": read failed");
  return parse_model_config(text, path.string());
}

nlohmann::json to_json(const model_config& cfg) {
  json j = json::object();
  j["architectures"] = json::array({architecture_of(cfg.model_type)});
  j["model_type"] = cfg.model_type;
  j["vocab_size"] = cfg.vocab_size;
  j["hidden_size"] = cfg.hidden_size;
  j["intermediate_size"] = cfg.intermediate_size;
  j["num_hidden_layers"] = cfg.num_hidden_layers;
  j["num_attention_heads"] = cfg.num_attention_heads;
  j["num_key_value_heads"] = cfg.num_key_value_heads;
  j["head_dim"] = cfg.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = cfg.max_position_embeddings;
  j["rms_norm_eps"] = shortest(cfg.rms_norm_eps);
  j["rope_theta"] = shortest(cfg.rope_theta);
  if (cfg.rope_scaling.type.empty()) {
    j["rope_scaling"] = nullptr;
  } else {
    json rs = {{"rope_type", cfg.rope_scaling.type},
               {"factor", shortest(cfg.rope_scaling.factor)}};
    if (cfg.rope_scaling.type == "llama3") {
      rs["low_freq_factor"] = shortest(cfg.rope_scaling.low_freq_factor);
      rs["high_freq_factor"] = shortest(cfg.rope_scaling.high_freq_factor);
      rs["original_max_position_embeddings"] =
        cfg.rope_scaling.original_max_position_embeddings;
    }
    j["rope_scaling"] = std::move(rs);
  }
  j["tie_word_embeddings"] = cfg.tie_word_embeddings;
  j["attention_bias"] = cfg.attention_bias;
  j["torch_dtype"] = torch_dtype_name(cfg.torch_dtype);
  j["bos_token_id"] = cfg.bos_token_id ? json(*cfg.bos_token_id) : json(nullptr);
  if (cfg.eos_token_ids.empty())
    j["eos_token_id"] = nullptr;
  else if (cfg.eos_token_ids.size() == 1)
    j["eos_token_id"] = cfg.eos_token_ids.front();
  else
    j["eos_token_id"] = cfg.eos_token_ids;
  return j;
}

std::optional<model_config> model_shape(std::string_view name) {
  model_config c;
  c.model_type = "llama";
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.torch_dtype = dtype::bf16;
  c.bos_token_id = 0;
  c.eos_token_ids = {1, 4};
  auto set = [&](int32_t hidden, int32_t layers, int32_t heads, int32_t kv_heads,
                 int32_t intermediate, int32_t vocab, int32_t max_pos) {
    c.hidden_size = hidden;
    c.num_hidden_layers = layers;
    c.num_attention_heads = heads;
    c.num_key_value_heads = kv_heads;
    c.head_dim = hidden / heads;
    c.intermediate_size = intermediate;
    c.vocab_size = vocab;
    c.max_position_embeddings = max_pos;
  };
  if (name == "tiny") {
    set(288, 6, 6, 6, 768, 32000, 2048);
  } else if (name == "small") {
    set(768, 12, 12, 4, 2048, 32000, 2048);
  } else if (name == "micro") {
    set(128, 4, 8, 2, 320, 2048, 1024);
  } else if (name.starts_with("nano")) {
    set(64, 2, 4, 2, 128, 512, 512);
    if (name == "nano-tied") {
      c.tie_word_embeddings = true;
    } else if (name == "nano-mha") {
      c.num_key_value_heads = 4;
    } else if (name == "nano-qwen2") {
      c.model_type = "qwen2";
      c.attention_bias = true;
      c.rope_theta = 1e6f;
    } else if (name == "nano-llama3") {
      c.rope_theta = 500000.0f;
      c.rope_scaling = {.type = "llama3",
                        .factor = 8.0f,
                        .low_freq_factor = 1.0f,
                        .high_freq_factor = 4.0f,
                        .original_max_position_embeddings = 128};
    } else if (name != "nano") {
      return std::nullopt;
    }
  } else if (name == "llama3-8b" || name == "llama3-70b") {
    // Llama 3.1's published configs (meta-llama/Llama-3.1-8B, -70B), for
    // the sim backend; BOS/EOS stay the demo tokenizer's.
    if (name == "llama3-8b")
      set(4096, 32, 32, 8, 14336, 128256, 131072);
    else
      set(8192, 80, 64, 8, 28672, 128256, 131072);
    c.rope_theta = 500000.0f;
    c.rope_scaling = {.type = "llama3",
                      .factor = 8.0f,
                      .low_freq_factor = 1.0f,
                      .high_freq_factor = 4.0f,
                      .original_max_position_embeddings = 8192};
  } else {
    return std::nullopt;
  }
  return c;
}

std::vector<std::string> model_shape_names() {
  return {"tiny",       "small",      "micro",       "nano",      "nano-tied",
          "nano-mha",   "nano-qwen2", "nano-llama3", "llama3-8b", "llama3-70b"};
}

} // namespace tessera::engine
