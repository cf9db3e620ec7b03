#include "kvstore/disk_codec.hpp"

#include <cstring>
#include <memory>
#include <vector>

namespace tessera::kvstore::disk_codec {
namespace {

void put_be64(char* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8)
    p[i] = static_cast<char>(v & 0xff);
}

uint64_t get_be64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

template <class T>
void put_le(char* p, T v) {
  auto u = static_cast<std::make_unsigned_t<T>>(v);
  for (size_t i = 0; i < sizeof(T); ++i, u = static_cast<decltype(u)>(u >> 8))
    p[i] = static_cast<char>(u & 0xff);
}

template <class T>
T get_le(const char* p) {
  std::make_unsigned_t<T> u = 0;
  for (size_t i = sizeof(T); i-- > 0;)
    u = static_cast<decltype(u)>((u << 8) | static_cast<uint8_t>(p[i]));
  return static_cast<T>(u);
}

constexpr size_t header_checked_bytes = 72;

void put_key(char* p, const block_key& k) {
  put_be64(p, k.ns);
  put_be64(p + 8, k.hash.hi);
  put_be64(p + 16, k.hash.lo);
}

block_key get_key(const char* p) { return {get_be64(p), {get_be64(p + 8), get_be64(p + 16)}}; }

} // namespace

std::string encode_key(const block_key& k) {
  std::string out(key_bytes, '\0');
  out[0] = static_cast<char>(key_version);
  put_key(out.data() + 1, k);
  return out;
}

std::optional<block_key> decode_key(std::string_view bytes) {
  if (bytes.size() != key_bytes || static_cast<uint8_t>(bytes[0]) != key_version)
    return std::nullopt;
  return get_key(bytes.data() + 1);
}

std::string encode_header(const block_key& k, const block_meta& meta, size_t payload_bytes) {
  std::string h(header_bytes, '\0');
  char* p = h.data();
  put_le<uint32_t>(p + 0, value_magic);
  put_le<uint16_t>(p + 4, value_version);
  put_le<uint16_t>(p + 6, static_cast<uint16_t>(header_bytes));
  put_le<uint64_t>(p + 8, k.ns);
  put_le<uint64_t>(p + 16, k.hash.hi);
  put_le<uint64_t>(p + 24, k.hash.lo);
  put_le<int32_t>(p + 32, meta.layout.block_tokens);
  put_le<int32_t>(p + 36, meta.layout.num_layers);
  put_le<int32_t>(p + 40, meta.layout.num_kv_heads);
  put_le<int32_t>(p + 44, meta.layout.head_dim);
  p[48] = static_cast<char>(meta.layout.kv_dtype);
  p[49] = static_cast<char>(meta.codec);
  put_le<int32_t>(p + 52, meta.token_count);
  put_le<uint64_t>(p + 56, payload_bytes);
  put_le<uint64_t>(p + 64, meta.checksum);
  put_le<uint64_t>(p + 72, engine::hash_bytes(p, header_checked_bytes, 0));
  return h;
}

std::string encode_value(const block_key& k, const stored_block& b) {
  std::string out = encode_header(k, b.meta, b.payload_bytes());
  if (b.payload)
    out.append(reinterpret_cast<const char*>(b.payload->data()), b.payload->size());
  return out;
}

const char* to_string(decode_status s) {
  switch (s) {
    case decode_status::ok: return "ok";
    case decode_status::too_short: return "too_short";
    case decode_status::bad_magic: return "bad_magic";
    case decode_status::bad_version: return "bad_version";
    case decode_status::bad_header_checksum: return "bad_header_checksum";
    case decode_status::wrong_key: return "wrong_key";
    case decode_status::bad_layout: return "bad_layout";
    case decode_status::bad_size: return "bad_size";
    case decode_status::bad_checksum: return "bad_checksum";
  }
  return "unknown";
}

decoded_value decode_value(const block_key& expected, std::string_view bytes) {
  decoded_value out;
  auto fail = [&](decode_status s) {
    out.status = s;
    return out;
  };
  if (bytes.size() < header_bytes)
    return fail(decode_status::too_short);
  const char* p = bytes.data();
  if (get_le<uint32_t>(p) != value_magic || get_le<uint16_t>(p + 6) != header_bytes)
    return fail(decode_status::bad_magic);
  if (get_le<uint16_t>(p + 4) != value_version)
    return fail(decode_status::bad_version);
  if (get_le<uint64_t>(p + 72) != engine::hash_bytes(p, header_checked_bytes, 0))
    return fail(decode_status::bad_header_checksum);
  if (get_le<uint64_t>(p + 8) != expected.ns || get_le<uint64_t>(p + 16) != expected.hash.hi ||
      get_le<uint64_t>(p + 24) != expected.hash.lo)
    return fail(decode_status::wrong_key);
  block_meta meta;
  meta.layout.block_tokens = get_le<int32_t>(p + 32);
  meta.layout.num_layers = get_le<int32_t>(p + 36);
  meta.layout.num_kv_heads = get_le<int32_t>(p + 40);
  meta.layout.head_dim = get_le<int32_t>(p + 44);
  meta.layout.kv_dtype = static_cast<engine::dtype>(static_cast<uint8_t>(p[48]));
  meta.token_count = get_le<int32_t>(p + 52);
  meta.checksum = get_le<uint64_t>(p + 64);
  const auto codec = static_cast<uint8_t>(p[49]);
  if (codec > static_cast<uint8_t>(block_codec::int8))
    return fail(decode_status::bad_layout);
  meta.codec = static_cast<block_codec>(codec);
  if (!layout_is_sane(meta.layout) || meta.token_count < 1 ||
      meta.token_count > meta.layout.block_tokens)
    return fail(decode_status::bad_layout);
  uint64_t payload_bytes = get_le<uint64_t>(p + 56);
  if (payload_bytes != bytes.size() - header_bytes ||
      payload_bytes != encoded_payload_bytes(meta.layout, meta.codec))
    return fail(decode_status::bad_size);
  std::string_view payload = bytes.substr(header_bytes);
  if (payload_checksum(payload.data(), payload.size()) != meta.checksum)
    return fail(decode_status::bad_checksum);
  // Copied from the range: a sized vector would first zero the bytes (a
  // whole extra pass over a 192 KiB block, and its page faults).
  const auto* first = reinterpret_cast<const std::byte*>(payload.data());
  auto data = std::make_shared<std::vector<std::byte>>(first, first + payload.size());
  out.block.meta = meta;
  out.block.payload = std::move(data);
  out.status = decode_status::ok;
  return out;
}

std::string encode_order_key(uint64_t seq) {
  std::string out(8, '\0');
  put_be64(out.data(), seq);
  return out;
}

std::optional<uint64_t> decode_order_key(std::string_view bytes) {
  if (bytes.size() != 8)
    return std::nullopt;
  return get_be64(bytes.data());
}

std::string encode_order_value(const block_key& k, uint64_t charged_bytes) {
  std::string out(order_value_bytes, '\0');
  out[0] = static_cast<char>(key_version);
  put_key(out.data() + 1, k);
  put_le<uint64_t>(out.data() + 25, charged_bytes);
  return out;
}

std::optional<order_entry> decode_order_value(std::string_view bytes) {
  if (bytes.size() != order_value_bytes || static_cast<uint8_t>(bytes[0]) != key_version)
    return std::nullopt;
  return order_entry{get_key(bytes.data() + 1), get_le<uint64_t>(bytes.data() + 25)};
}

} // namespace tessera::kvstore::disk_codec
