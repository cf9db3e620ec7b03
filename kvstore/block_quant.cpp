#include "kvstore/block_quant.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace tessera::kvstore {

std::optional<quantized_block> quantize_int8(const stored_block& b) {
  const auto& l = b.meta.layout;
  // An int8 pool block (kv_dtype i8) is int8 already: a tier keeps it as it
  // is, with its per-token scales, never quantized a second time.
  if (!b.payload || !layout_is_sane(l) || b.payload->size() != l.block_bytes() ||
      l.kv_dtype == engine::dtype::i8)
    return std::nullopt;
  const size_t slab_elems = static_cast<size_t>(l.block_tokens) * l.head_dim;
  const size_t slabs = static_cast<size_t>(l.num_layers) * 2 * l.num_kv_heads;
  quantized_block q;
  q.layout = l;
  q.scales.resize(slabs);
  q.values.resize(slabs * slab_elems);
  const void* data = b.payload->data();
  for (size_t s = 0; s < slabs; ++s) {
    const size_t base = s * slab_elems;
    float max_abs = 0;
    for (size_t i = 0; i < slab_elems; ++i) {
      float x = engine::load_as_f32(data, l.kv_dtype, base + i);
      if (!std::isfinite(x))
        return std::nullopt;
      max_abs = std::max(max_abs, std::fabs(x));
    }
    const float scale = max_abs / 127.0f;
    q.scales[s] = scale;
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;
    for (size_t i = 0; i < slab_elems; ++i) {
      float v = std::nearbyint(engine::load_as_f32(data, l.kv_dtype, base + i) * inv);
      q.values[base + i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
  }
  return q;
}

std::vector<std::byte> dequantize_int8(const quantized_block& q) {
  const auto& l = q.layout;
  std::vector<std::byte> out(q.values.size() * engine::dtype_size(l.kv_dtype));
  const size_t slab_elems = q.scales.empty() ? 0 : q.values.size() / q.scales.size();
  for (size_t i = 0; i < q.values.size(); ++i)
    engine::store_from_f32(out.data(), l.kv_dtype, i,
                           static_cast<float>(q.values[i]) * q.scales[i / slab_elems]);
  return out;
}

// The scales are copied as host floats; the encoding says little-endian.
static_assert(std::endian::native == std::endian::little, "int8 block encoding assumes little-endian");

std::optional<stored_block> encode_int8_block(const stored_block& b) {
  if (b.meta.codec != block_codec::exact)
    return std::nullopt;
  auto q = quantize_int8(b);
  if (!q)
    return std::nullopt;
  const size_t scale_bytes = q->scales.size() * sizeof(float);
  std::vector<std::byte> bytes(scale_bytes + q->values.size());
  std::memcpy(bytes.data(), q->scales.data(), scale_bytes);
  std::memcpy(bytes.data() + scale_bytes, q->values.data(), q->values.size());
  stored_block out = make_block(b.meta.layout, b.meta.token_count, std::move(bytes));
  out.meta.codec = block_codec::int8;
  return out;
}

std::optional<stored_block> decode_int8_block(const stored_block& b) {
  const auto& l = b.meta.layout;
  if (b.meta.codec != block_codec::int8 || !b.payload || !layout_is_sane(l) ||
      b.payload->size() != encoded_payload_bytes(l, block_codec::int8))
    return std::nullopt;
  quantized_block q;
  q.layout = l;
  q.scales.resize(static_cast<size_t>(l.num_layers) * 2 * l.num_kv_heads);
  const size_t scale_bytes = q.scales.size() * sizeof(float);
  std::memcpy(q.scales.data(), b.payload->data(), scale_bytes);
  for (float s : q.scales)
    if (!std::isfinite(s) || s < 0)
      return std::nullopt;
  q.values.resize(b.payload->size() - scale_bytes);
  std::memcpy(q.values.data(), b.payload->data() + scale_bytes, q.values.size());
  return make_block(l, b.meta.token_count, dequantize_int8(q));
}

std::optional<quantization_report> measure_int8(const stored_block& b) {
  auto q = quantize_int8(b);
  if (!q)
    return std::nullopt;
  const auto back = dequantize_int8(*q);
  const auto t = b.meta.layout.kv_dtype;
  const size_t n = q->values.size();
  quantization_report r;
  double err2 = 0, x2 = 0;
  for (size_t i = 0; i < n; ++i) {
    double x = engine::load_as_f32(b.payload->data(), t, i);
    double e = std::fabs(x - engine::load_as_f32(back.data(), t, i));
    r.max_abs_error = std::max(r.max_abs_error, e);
    err2 += e * e;
    x2 += x * x;
  }
  r.saved_fraction = 1.0 - static_cast<double>(q->bytes()) / static_cast<double>(b.payload->size());
  r.rms_error = n ? std::sqrt(err2 / static_cast<double>(n)) : 0.0;
  r.rms_relative_error = x2 > 0 ? std::sqrt(err2 / x2) : 0.0;
  return r;
}

} // namespace tessera::kvstore
