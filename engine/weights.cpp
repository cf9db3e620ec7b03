#include "engine/weights.hpp"

#include <fstream>
#include <map>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include "engine/engine_errc.hpp"
#include "engine/weight_layout.hpp"
#include "engine/weights_check.hpp"

namespace tessera::engine {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t max_index_bytes = size_t{64} << 20;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Where each tensor name lives: one file, or shards through an index.
class tensor_source {
public:
  /// Opens `dir`'s weights: model.safetensors if present (as Hugging Face
  /// prefers it), else model.safetensors.index.json and its shards.
  [[nodiscard]] caf::error open(const fs::path& dir) {
    auto single = dir / "model.safetensors";
    auto index = dir / "model.safetensors.index.json";
    std::error_code ec;
    if (fs::exists(single, ec) || !fs::exists(index, ec)) {
      described_ = single;
      auto f = safetensors_file::open(single);
      if (!f)
        return f.error();
      files_.push_back(std::move(*f));
      return {};
    }
    described_ = index;
    return open_index(dir, index);
  }

  /// The tensor `name`, or nullptr.
  [[nodiscard]] const tensor_view* find(const std::string& name) const {
    if (weight_map_.empty())
      return files_.front().find(name);
    auto it = weight_map_.find(name);
    return it == weight_map_.end() ? nullptr : files_[it->second].find(name);
  }

  /// The file a tensor is in, for errors.
  [[nodiscard]] const fs::path& file_of(const std::string& name) const {
    if (weight_map_.empty())
      return files_.front().path();
    return files_[weight_map_.at(name)].path();
  }

  /// model.safetensors or the index: where a missing tensor should be.
  [[nodiscard]] const fs::path& described() const { return described_; }

  std::vector<safetensors_file> take_files() { return std::move(files_); }

private:
  [[nodiscard]] caf::error open_index(const fs::path& dir, const fs::path& index) {
    auto fail = [&](const std::string& what) {
      return make_engine_error(engine_errc::bad_weights, index.string() + ": " + what);
    };
    std::error_code ec;
    auto size = fs::file_size(index, ec);
    std::ifstream in{index, std::ios::binary};
    if (ec || !in)
      return make_engine_error(engine_errc::io_error, index.string() + ": cannot open: " +
                                                        (ec ? ec.message() : "read failed"));
    if (size > max_index_bytes)
      return fail("larger than " + std::to_string(max_index_bytes) + " bytes");
    std::string text(size, '\0');
    in.read(text.data(), static_cast<std::streamsize>(size));
    text.resize(static_cast<size_t>(in.gcount()));
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::parse_error& e) {
      return fail(std::string{"malformed JSON: "} + e.what());
    }
    auto wm = doc.is_object() ? doc.find("weight_map") : doc.end();
    if (wm == doc.end() || !wm->is_object())
      return fail("no \"weight_map\" object");

    std::map<std::string, size_t> shard_index; // file name -> files_ index
    for (auto& [name, value] : wm->items()) {
      if (!value.is_string())
        return fail("weight_map entry '" + name + "' is not a file name string");
      auto shard = value.get<std::string>();
      if (shard.empty() || shard == "." || shard == ".." ||
          shard.find('/') != std::string::npos)
        return fail("weight_map entry '" + name + "' names '" + shard +
                    "', which is not a file in the model folder");
      auto [it, inserted] = shard_index.emplace(shard, files_.size());
      if (inserted) {
        auto f = safetensors_file::open(dir / shard);
        if (!f)
          return f.error();
        files_.push_back(std::move(*f));
      }
      weight_map_.emplace(name, it->second);
    }
    if (files_.empty())
      return fail("weight_map is empty");
    for (auto& [name, file] : weight_map_)
      if (files_[file].find(name) == nullptr)
        return make_engine_error(engine_errc::missing_tensor,
                                 files_[file].path().string() + ": tensor '" + name +
                                   "', which " + index.filename().string() +
                                   " places in this shard, is missing");
    return {};
  }

  fs::path described_;
  std::vector<safetensors_file> files_;
  std::map<std::string, size_t, std::less<>> weight_map_;
};

/// Looks up tensors by name and checks their shapes.
class tensor_binder {
public:
  explicit tensor_binder(const tensor_source& src) : src_(src) {}

  /// The tensor `name` with exactly `shape`; remembers the first error.
  tensor_view get(const std::string& name, const std::vector<int64_t>& shape) {
    if (err_)
      return {};
    const auto* t = src_.find(name);
    if (t == nullptr) {
      err_ = make_engine_error(engine_errc::missing_tensor,
                               src_.described().string() + ": missing tensor '" + name + "'");
      return {};
    }
    if (t->shape != shape) {
      err_ = make_engine_error(engine_errc::missing_tensor,
                               src_.file_of(name).string() + ": tensor '" + name +
                                 "' has shape " + shape_text(t->shape) + ", expected " +
                                 shape_text(shape));
      return {};
    }
    return *t;
  }

  [[nodiscard]] caf::error error() const { return err_; }

private:
  const tensor_source& src_;
  caf::error err_;
};

} // namespace

size_t model_weights::bytes_read_per_token() const {
  // lm_head counts even when tied: every row is read to compute the logits.
  size_t total = final_norm.size_bytes + lm_head.size_bytes;
  for (const auto& l : layers) {
    for (const auto* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.mlp_norm, &l.w_gate,
                          &l.w_up, &l.w_down})
      total += t->size_bytes;
    for (const auto* b : {&l.bq, &l.bk, &l.bv})
      if (b->has_value())
        total += (*b)->size_bytes;
  }
  return total;
}

caf::expected<std::unique_ptr<model_weights>> load_model_weights(const fs::path& dir) {
  auto cfg = load_model_config(dir);
  if (!cfg)
    return cfg.error();
  tensor_source src;
  if (auto err = src.open(dir))
    return err;

  auto w = std::make_unique<model_weights>();
  w->config = *cfg;
  const auto& c = w->config;
  const int64_t h = c.hidden_size;
  const int64_t q = int64_t{c.num_attention_heads} * c.head_dim;
  const int64_t kv = int64_t{c.num_key_value_heads} * c.head_dim;
  const int64_t inter = c.intermediate_size;

  tensor_binder bind{src};
  w->embed = bind.get("model.embed_tokens.weight", {c.vocab_size, h});
  w->final_norm = bind.get("model.norm.weight", {h});
  // Strict: an untied model must ship its lm_head (HF would silently leave it
  // random); a tied one uses the embedding even if the file carries a copy.
  w->lm_head = c.tie_word_embeddings ? w->embed : bind.get("lm_head.weight", {c.vocab_size, h});
  w->layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    auto& l = w->layers[static_cast<size_t>(i)];
    auto get = [&](const char* suffix, std::vector<int64_t> shape) {
      return bind.get(layer_weight_name(i, suffix), shape);
    };
    l.attn_norm = get("input_layernorm.weight", {h});
    l.wq = get("self_attn.q_proj.weight", {q, h});
    l.wk = get("self_attn.k_proj.weight", {kv, h});
    l.wv = get("self_attn.v_proj.weight", {kv, h});
    l.wo = get("self_attn.o_proj.weight", {h, q});
    if (c.attention_bias) {
      l.bq = get("self_attn.q_proj.bias", {q});
      l.bk = get("self_attn.k_proj.bias", {kv});
      l.bv = get("self_attn.v_proj.bias", {kv});
    }
    l.mlp_norm = get("post_attention_layernorm.weight", {h});
    l.w_gate = get("mlp.gate_proj.weight", {inter, h});
    l.w_up = get("mlp.up_proj.weight", {inter, h});
    l.w_down = get("mlp.down_proj.weight", {h, inter});
    if (bind.error())
      break;
  }
  if (auto err = bind.error())
    return err;
  // NaN or inf in a weight would make every request through it fail at its
  // first token: refuse the model now, naming the value. Only the tensors
  // the forward pass reads (the embedding too) are checked, each once.
  std::vector<const tensor_view*> used{&w->embed, &w->final_norm};
  if (!c.tie_word_embeddings)
    used.push_back(&w->lm_head);
  for (const auto& l : w->layers) {
    for (const auto* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.mlp_norm, &l.w_gate,
                          &l.w_up, &l.w_down})
      used.push_back(t);
    for (const auto* b : {&l.bq, &l.bk, &l.bv})
      if (b->has_value())
        used.push_back(&**b);
  }
  for (const auto* t : used)
    if (auto err = check_finite(*t, src.file_of(t->name)))
      return err;
  w->files = src.take_files();
  return w;
}

} // namespace tessera::engine
