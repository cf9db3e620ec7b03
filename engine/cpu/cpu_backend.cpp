#include "engine/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/mman.h>

#include "common/assert.hpp"
#include "engine/block_hash.hpp"
#include "engine/cpu/attention.hpp"
#include "engine/cpu/kernels.hpp"
#include "engine/cpu/rope.hpp"
#include "engine/cpu/thread_pool.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::engine::cpu {

namespace {

// The KV pool: anonymous pages, zero until touched, so a large pool costs
// nothing until blocks are used, and never-written slots read as 0.0 (a
// masked-out position then contributes 0 * 0, never NaN).
class kv_pool {
public:
  explicit kv_pool(size_t bytes) : size_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TESSERA_ASSERT(p != MAP_FAILED, "cannot map the KV pool");
    data_ = static_cast<std::byte*>(p);
  }
  ~kv_pool() { ::munmap(data_, size_); }
  kv_pool(const kv_pool&) = delete;
  kv_pool& operator=(const kv_pool&) = delete;
  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] size_t size() const { return size_; }

private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

std::vector<float> to_f32_vector(const tensor_view& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  to_f32(t.data, t.type, t.numel(), out.data());
  return out;
}

struct layer_f32 {
  std::vector<float> attn_norm, mlp_norm, bq, bk, bv;
};

class cpu_backend final : public backend {
public:
  cpu_backend(std::shared_ptr<const model_weights> w, const cpu_backend_options& opts,
              int32_t num_blocks)
    : w_(std::move(w)), cfg_(w_->config), pool_(opts.threads), num_blocks_(num_blocks) {
    layout_.block_tokens = opts.block_tokens;
    layout_.num_layers = cfg_.num_hidden_layers;
    layout_.num_kv_heads = cfg_.num_key_value_heads;
    layout_.head_dim = cfg_.head_dim;
    layout_.kv_dtype = opts.kv_dtype;
    kv_ = std::make_unique<kv_pool>(static_cast<size_t>(num_blocks_) * layout_.block_bytes());
    for (const auto& lw : w_->layers) {
      layer_f32 l;
      l.attn_norm = to_f32_vector(lw.attn_norm);
      l.mlp_norm = to_f32_vector(lw.mlp_norm);
      if (lw.bq) {
        l.bq = to_f32_vector(*lw.bq);
        l.bk = to_f32_vector(*lw.bk);
        l.bv = to_f32_vector(*lw.bv);
      }
      layers_.push_back(std::move(l));
    }
    final_norm_ = to_f32_vector(w_->final_norm);
    inv_freq_ = rope_inv_freq(cfg_);
    const std::string cfg_text = to_json(cfg_).dump();
    fingerprint_ = hash_bytes(w_->embed.data, w_->embed.size_bytes,
                              hash_bytes(cfg_text.data(), cfg_text.size()));
    scratch_.resize(static_cast<size_t>(pool_.size()));
  }

  const model_config& config() const override { return cfg_; }
  const kv_layout& layout() const override { return layout_; }
  int32_t num_blocks() const override { return num_blocks_; }
  uint64_t model_fingerprint() const override { return fingerprint_; }
  std::string description() const override {
    return "cpu " + std::string{kernel_isa()} + " x" + std::to_string(pool_.size());
  }

  void copy_block(kv_block_id src, kv_block_id dst) override {
    const size_t bb = layout_.block_bytes();
    std::memcpy(kv_->data() + dst * bb, kv_->data() + src * bb, bb);
  }
  void read_block(kv_block_id id, std::span<std::byte> out) const override {
    const size_t bb = layout_.block_bytes();
    TESSERA_ASSERT(out.size() == bb);
    std::memcpy(out.data(), kv_->data() + id * bb, bb);
  }
  void write_block(kv_block_id id, std::span<const std::byte> in) override {
    const size_t bb = layout_.block_bytes();
    TESSERA_ASSERT(in.size() == bb);
    std::memcpy(kv_->data() + id * bb, in.data(), bb);
  }
  // One mapping of num_blocks_ * block_bytes(), block id at id * block_bytes()
  // (as copy_block / read_block / write_block address it).
  std::span<std::byte> kv_pool_memory() override { return {kv_->data(), kv_->size()}; }
  std::span<const std::byte> kv_pool_memory() const override {
    return {kv_->data(), kv_->size()};
  }

  void forward(std::span<const forward_seq> seqs, float* logits) override;

private:
  void linear(const float* x, int64_t m, const tensor_view& w, const std::vector<float>& bias,
              float* y) {
    const int64_t n = w.shape[0], k = w.shape[1];
    matmul(pool_, x, m, k, k, w.data, w.type, n, bias.empty() ? nullptr : bias.data(), y, n);
  }
  struct linear_out {
    const tensor_view& w;
    const std::vector<float>& bias;
    float* y;
  };
  // Several projections of the same input in one parallel region.
  void linear3(const float* x, int64_t m, std::initializer_list<linear_out> outs) {
    matmul_output mo[3];
    size_t n = 0;
    for (const auto& o : outs)
      mo[n++] = {o.w.data, o.w.type, o.w.shape[0], o.bias.empty() ? nullptr : o.bias.data(), o.y,
                 o.w.shape[0]};
    const int64_t k = outs.begin()->w.shape[1];
    matmul_multi(pool_, x, m, k, k, std::span{mo, n});
  }
  // Runs fn(row) for rows [0, n), split over the pool when worth it: in
  // runs of rows (about four per thread) taken by whichever thread is free,
  // so a descheduled thread does not hold the others up.
  template <class F>
  void for_rows(int64_t n, F&& fn) {
    if (n < 4) {
      for (int64_t i = 0; i < n; ++i)
        fn(i);
      return;
    }
    const int64_t per = std::max<int64_t>(1, n / (4 * static_cast<int64_t>(pool_.size())));
    pool_.run_chunks((n + per - 1) / per, [&](int64_t c) {
      for (int64_t i = c * per, e = std::min(n, i + per); i < e; ++i)
        fn(i);
    });
  }

  // x += xn, row by row: a sublayer's output joins the residual stream.
  void add_residual(int64_t rows) {
    const int64_t hidden = cfg_.hidden_size;
    for_rows(rows, [&](int64_t t) {
      float* xr = x_.data() + t * hidden;
      const float* o = xn_.data() + t * hidden;
      for (int64_t i = 0; i < hidden; ++i)
        xr[i] += o[i];
    });
  }

  std::shared_ptr<const model_weights> w_;
  model_config cfg_;
  thread_pool pool_;
  int32_t num_blocks_;
  kv_layout layout_;
  std::unique_ptr<kv_pool> kv_;
  std::vector<layer_f32> layers_;
  std::vector<float> final_norm_;
  std::vector<float> inv_freq_;
  uint64_t fingerprint_ = 0;
  // Activations, resized per step: [tokens, width].
  std::vector<float> x_, xn_, q_, k_, v_, att_, gate_, up_, rope_cos_, rope_sin_, head_in_;
  std::vector<std::vector<float>> scratch_; // per thread, attention scores
};

void cpu_backend::forward(std::span<const forward_seq> seqs, float* logits) {
  const int32_t hidden = cfg_.hidden_size, hd = cfg_.head_dim;
  const int32_t nh = cfg_.num_attention_heads, nkv = cfg_.num_key_value_heads;
  const int32_t inter = cfg_.intermediate_size, half = hd / 2;
  const int32_t group = nh / nkv;

  // Flatten the batch: token t belongs to seq tok_seq[t] at position tok_pos[t].
  std::vector<int32_t> tok_seq, tok_pos, tok_id;
  int32_t max_ctx = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto& f = seqs[s];
    for (size_t i = 0; i < f.tokens.size(); ++i) {
      tok_seq.push_back(static_cast<int32_t>(s));
      tok_pos.push_back(f.start_pos + static_cast<int32_t>(i));
      tok_id.push_back(f.tokens[i]);
    }
    max_ctx = std::max(max_ctx, f.start_pos + static_cast<int32_t>(f.tokens.size()));
  }
  const int64_t T = static_cast<int64_t>(tok_id.size());
  if (T == 0)
    return;
  x_.resize(T * hidden);
  xn_.resize(T * hidden);
  q_.resize(T * nh * hd);
  k_.resize(T * nkv * hd);
  v_.resize(T * nkv * hd);
  att_.resize(T * nh * hd);
  gate_.resize(T * inter);
  up_.resize(T * inter);
  rope_cos_.resize(T * half);
  rope_sin_.resize(T * half);

  const auto& embed = w_->embed;
  const size_t embed_row = static_cast<size_t>(hidden) * dtype_size(embed.type);
  for_rows(T, [&](int64_t t) {
    to_f32(embed.data + static_cast<size_t>(tok_id[t]) * embed_row, embed.type, hidden,
           x_.data() + t * hidden);
    rope_angles(inv_freq_, tok_pos[t], rope_cos_.data() + t * half, rope_sin_.data() + t * half);
  });

  attention_shape shape;
  shape.layout = &layout_;
  shape.pool = kv_->data();
  shape.n_heads = nh;
  shape.n_kv_heads = nkv;
  const size_t scratch_floats = attention_scratch_floats(shape, max_ctx);
  for (auto& s : scratch_)
    if (s.size() < scratch_floats)
      s.resize(scratch_floats);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(hd));

  for (int32_t li = 0; li < cfg_.num_hidden_layers; ++li) {
    const auto& lw = w_->layers[li];
    const auto& lf = layers_[li];
    shape.layer = li;
    for_rows(T, [&](int64_t t) {
      rmsnorm(x_.data() + t * hidden, lf.attn_norm.data(), cfg_.rms_norm_eps, hidden,
              xn_.data() + t * hidden);
    });
    linear3(xn_.data(), T, {{lw.wq, lf.bq, q_.data()}, {lw.wk, lf.bk, k_.data()},
                            {lw.wv, lf.bv, v_.data()}});
    for_rows(T, [&](int64_t t) {
      const float* c = rope_cos_.data() + t * half;
      const float* s = rope_sin_.data() + t * half;
      float* qt = q_.data() + t * nh * hd;
      rope_apply(qt, nh, hd, c, s);
      rope_apply(k_.data() + t * nkv * hd, nkv, hd, c, s);
      for (int64_t i = 0; i < static_cast<int64_t>(nh) * hd; ++i)
        qt[i] *= q_scale;
      kv_store(shape, seqs[tok_seq[t]].block_table, tok_pos[t], k_.data() + t * nkv * hd,
               v_.data() + t * nkv * hd);
    });
    // Attention units (token, kv head), one chunk each, taken by whichever
    // thread is free: later tokens of a prefill attend over more positions,
    // and a thread descheduled on a shared host leaves its units to the
    // others instead of holding up every layer.
    const int64_t units = T * nkv;
    pool_.run_chunks(units, [&](int64_t u, int thread) {
      const int64_t t = u / nkv;
      const int32_t g = static_cast<int32_t>(u % nkv);
      const size_t off = (static_cast<size_t>(t) * nh + static_cast<size_t>(g) * group) * hd;
      attend(shape, seqs[tok_seq[t]].block_table, g, tok_pos[t], q_.data() + off,
             att_.data() + off, scratch_[static_cast<size_t>(thread)].data());
    });
    // Output projection, then the residual.
    linear(att_.data(), T, lw.wo, {}, xn_.data());
    add_residual(T);
    // SwiGLU MLP.
    for_rows(T, [&](int64_t t) {
      rmsnorm(x_.data() + t * hidden, lf.mlp_norm.data(), cfg_.rms_norm_eps, hidden,
              xn_.data() + t * hidden);
    });
    linear3(xn_.data(), T, {{lw.w_gate, {}, gate_.data()}, {lw.w_up, {}, up_.data()}});
    for_rows(T, [&](int64_t t) {
      silu_mul(gate_.data() + t * inter, up_.data() + t * inter, inter, gate_.data() + t * inter);
    });
    linear(gate_.data(), T, lw.w_down, {}, xn_.data());
    add_residual(T);
  }

  // Logits for the last logits_rows tokens of each sequence, in order.
  std::vector<int64_t> rows;
  int64_t t0 = 0;
  for (const auto& f : seqs) {
    const auto n = static_cast<int64_t>(f.tokens.size());
    TESSERA_ASSERT(f.logits_rows >= 0 && f.logits_rows <= n, "logits rows within the sequence's tokens");
    t0 += n;
    for (int64_t r = t0 - f.logits_rows; r < t0; ++r)
      rows.push_back(r);
  }
  if (rows.empty())
    return;
  head_in_.resize(rows.size() * hidden);
  for (size_t r = 0; r < rows.size(); ++r)
    rmsnorm(x_.data() + rows[r] * hidden, final_norm_.data(), cfg_.rms_norm_eps, hidden,
            head_in_.data() + r * hidden);
  const auto& head = w_->lm_head;
  matmul(pool_, head_in_.data(), static_cast<int64_t>(rows.size()), hidden, hidden, head.data,
         head.type, cfg_.vocab_size, nullptr, logits, cfg_.vocab_size);
}

} // namespace

caf::expected<std::unique_ptr<backend>>
make_cpu_backend(std::shared_ptr<const model_weights> weights, const cpu_backend_options& opts) {
  auto bad = [](std::string what) { return make_engine_error(engine_errc::bad_request, std::move(what)); };
  if (!weights)
    return bad("no model weights given to the CPU backend");
  const auto& cfg = weights->config;
  if (opts.block_tokens <= 0 || opts.block_tokens > 1024)
    return bad("block_tokens must be in [1, 1024], got " + std::to_string(opts.block_tokens));
  if (cfg.head_dim > 256 || cfg.head_dim % 2 != 0)
    return make_engine_error(engine_errc::unsupported,
                             "head_dim " + std::to_string(cfg.head_dim) + " is not supported (even, <= 256)");
  kv_layout l;
  l.block_tokens = opts.block_tokens;
  l.num_layers = cfg.num_hidden_layers;
  l.num_kv_heads = cfg.num_key_value_heads;
  l.head_dim = cfg.head_dim;
  l.kv_dtype = opts.kv_dtype;
  int64_t blocks = opts.num_blocks;
  if (blocks <= 0)
    blocks = static_cast<int64_t>(opts.kv_cache_bytes / l.block_bytes());
  if (blocks <= 0)
    return bad("the KV cache of " + std::to_string(opts.kv_cache_bytes) +
               " bytes holds no block of " + std::to_string(l.block_bytes()) + " bytes");
  if (blocks > (int64_t{1} << 30))
    return bad("too many KV blocks: " + std::to_string(blocks));
  return std::unique_ptr<backend>(
    new cpu_backend(std::move(weights), opts, static_cast<int32_t>(blocks)));
}

} // namespace tessera::engine::cpu
