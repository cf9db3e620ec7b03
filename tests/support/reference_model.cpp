#include "tests/support/reference_model.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tessera::test {

namespace {

using engine::tensor_view;
using vec = std::vector<double>;

vec to_double(const tensor_view& t) {
  vec out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = engine::load_as_f32(t.data, t.type, i);
  return out;
}

// y = W x (+ b), W [rows, cols] row-major.
vec linear(const vec& w, const vec& x, size_t rows, const vec* b = nullptr) {
  const size_t cols = x.size();
  vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (size_t c = 0; c < cols; ++c)
      acc += w[r * cols + c] * x[c];
    y[r] = acc + (b ? (*b)[r] : 0.0);
  }
  return y;
}

vec rmsnorm(const vec& x, const vec& w, double eps) {
  double ss = 0.0;
  for (double v : x)
    ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = x[i] * inv * w[i];
  return y;
}

vec inv_freq(const engine::model_config& c) {
  const int half = c.head_dim / 2;
  vec f(half);
  for (int i = 0; i < half; ++i)
    f[i] = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * i / c.head_dim);
  const auto& rs = c.rope_scaling;
  if (rs.type == "linear") {
    for (auto& x : f)
      x /= rs.factor;
  } else if (rs.type == "llama3") {
    const double old_len = rs.original_max_position_embeddings;
    const double low_wavelen = old_len / rs.low_freq_factor;
    const double high_wavelen = old_len / rs.high_freq_factor;
    for (auto& x : f) {
      const double wavelen = 2.0 * std::numbers::pi / x;
      if (wavelen > low_wavelen) {
        x = x / rs.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_len / wavelen - rs.low_freq_factor) /
                              (rs.high_freq_factor - rs.low_freq_factor);
        x = (1.0 - smooth) * x / rs.factor + smooth * x;
      }
    }
  }
  return f;
}

// HF rotate_half: first half paired with second half.
void rope(vec& x, int heads, int hd, const vec& freq, int pos) {
  const int half = hd / 2;
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < half; ++i) {
      const double a = x[h * hd + i], b = x[h * hd + i + half];
      const double ang = pos * freq[i];
      x[h * hd + i] = a * std::cos(ang) - b * std::sin(ang);
      x[h * hd + i + half] = b * std::cos(ang) + a * std::sin(ang);
    }
}

struct ref_layer {
  vec attn_norm, wq, wk, wv, wo, bq, bk, bv, mlp_norm, wg, wu, wd;
};

} // namespace

std::vector<std::vector<double>> reference_logits(const engine::model_weights& w,
                                                  std::span<const int32_t> tokens,
                                                  const reference_options& opts) {
  const auto& c = w.config;
  const int H = c.num_attention_heads, KV = c.num_key_value_heads, hd = c.head_dim;
  const size_t hidden = static_cast<size_t>(c.hidden_size), inter = static_cast<size_t>(c.intermediate_size);
  std::vector<ref_layer> L;
  for (const auto& lw : w.layers) {
    ref_layer l{to_double(lw.attn_norm), to_double(lw.wq), to_double(lw.wk), to_double(lw.wv),
                to_double(lw.wo), {}, {}, {}, to_double(lw.mlp_norm), to_double(lw.w_gate),
                to_double(lw.w_up), to_double(lw.w_down)};
    if (lw.bq) {
      l.bq = to_double(*lw.bq);
      l.bk = to_double(*lw.bk);
      l.bv = to_double(*lw.bv);
    }
    L.push_back(std::move(l));
  }
  const vec final_norm = to_double(w.final_norm);
  const vec head = to_double(w.lm_head);
  const vec freq = inv_freq(c);
  auto round_kv = [&](vec& v) {
    if (opts.round_kv_to_bf16)
      for (auto& x : v)
        x = engine::bf16_to_f32(engine::f32_to_bf16(static_cast<float>(x)));
  };

  // Dense caches: [layer][position] -> k / v of all kv heads.
  std::vector<std::vector<vec>> kc(L.size()), vc(L.size());
  std::vector<std::vector<double>> logits;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    vec x(hidden);
    for (size_t i = 0; i < hidden; ++i)
      x[i] = engine::load_as_f32(w.embed.data, w.embed.type, tokens[pos] * hidden + i);
    for (size_t li = 0; li < L.size(); ++li) {
      const auto& l = L[li];
      vec xn = rmsnorm(x, l.attn_norm, c.rms_norm_eps);
      vec q = linear(l.wq, xn, static_cast<size_t>(H) * hd, l.bq.empty() ? nullptr : &l.bq);
      vec k = linear(l.wk, xn, static_cast<size_t>(KV) * hd, l.bk.empty() ? nullptr : &l.bk);
      vec v = linear(l.wv, xn, static_cast<size_t>(KV) * hd, l.bv.empty() ? nullptr : &l.bv);
      rope(q, H, hd, freq, static_cast<int>(pos));
      rope(k, KV, hd, freq, static_cast<int>(pos));
      round_kv(k);
      round_kv(v);
      kc[li].push_back(k);
      vc[li].push_back(v);
      vec att(static_cast<size_t>(H) * hd, 0.0);
      for (int h = 0; h < H; ++h) {
        const int g = h / (H / KV);
        vec s(pos + 1);
        double m = -1e300;
        for (size_t j = 0; j <= pos; ++j) {
          double d = 0.0;
          for (int i = 0; i < hd; ++i)
            d += q[h * hd + i] * kc[li][j][g * hd + i];
          s[j] = d / std::sqrt(static_cast<double>(hd));
          m = std::max(m, s[j]);
        }
        double sum = 0.0;
        for (auto& e : s) {
          e = std::exp(e - m);
          sum += e;
        }
        for (size_t j = 0; j <= pos; ++j)
          for (int i = 0; i < hd; ++i)
            att[h * hd + i] += s[j] / sum * vc[li][j][g * hd + i];
      }
      vec o = linear(l.wo, att, hidden);
      for (size_t i = 0; i < hidden; ++i)
        x[i] += o[i];
      xn = rmsnorm(x, l.mlp_norm, c.rms_norm_eps);
      vec g = linear(l.wg, xn, inter);
      vec u = linear(l.wu, xn, inter);
      for (size_t i = 0; i < inter; ++i)
        g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      vec d = linear(l.wd, g, hidden);
      for (size_t i = 0; i < hidden; ++i)
        x[i] += d[i];
    }
    logits.push_back(linear(head, rmsnorm(x, final_norm, c.rms_norm_eps), static_cast<size_t>(c.vocab_size)));
  }
  return logits;
}

std::vector<int32_t> reference_greedy(const engine::model_weights& w, std::span<const int32_t> prompt,
                                      int n, std::vector<double>* margins,
                                      const reference_options& opts) {
  std::vector<int32_t> seq(prompt.begin(), prompt.end());
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    auto logits = reference_logits(w, seq, opts);
    const auto& last = logits.back();
    auto best = std::max_element(last.begin(), last.end()) - last.begin();
    double second = -1e300;
    for (size_t j = 0; j < last.size(); ++j)
      if (static_cast<ptrdiff_t>(j) != best)
        second = std::max(second, last[j]);
    if (margins)
      margins->push_back(last[best] - second);
    out.push_back(static_cast<int32_t>(best));
    seq.push_back(static_cast<int32_t>(best));
  }
  return out;
}

} // namespace tessera::test
