#include "kvstore/block.hpp"

#include <cstdio>

#include "engine/kv_int8.hpp"
#include "kvstore/kvstore_errc.hpp"

namespace tessera::kvstore {

const char* to_string(kv_tier t) {
  switch (t) {
    case kv_tier::host: return "host";
    case kv_tier::disk: return "disk";
  }
  return "unknown";
}

const char* to_string(block_codec c) {
  switch (c) {
    case block_codec::exact: return "exact";
    case block_codec::int8: return "int8";
  }
  return "unknown";
}

size_t encoded_payload_bytes(const engine::kv_layout& l, block_codec c) {
  if (c == block_codec::exact)
    return l.block_bytes();
  const size_t slabs = static_cast<size_t>(l.num_layers) * 2 * l.num_kv_heads;
  return slabs * (sizeof(float) + static_cast<size_t>(l.block_tokens) * l.head_dim);
}

uint64_t payload_checksum(const void* data, size_t size) {
  return engine::hash_bytes(data, size, 0);
}

stored_block make_block(const engine::kv_layout& layout, int32_t token_count,
                        std::vector<std::byte> bytes) {
  stored_block b;
  b.meta.layout = layout;
  b.meta.token_count = token_count;
  b.meta.checksum = payload_checksum(bytes.data(), bytes.size());
  // Made non-const and viewed as const: see host_tier::corrupt_for_testing.
  b.payload = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  return b;
}

bool verify_block(const stored_block& b) {
  return b.payload && payload_checksum(b.payload->data(), b.payload->size()) == b.meta.checksum;
}

bool layout_is_sane(const engine::kv_layout& l) {
  if (l.block_tokens <= 0 || l.num_layers <= 0 || l.num_kv_heads <= 0 || l.head_dim <= 0)
    return false;
  switch (l.kv_dtype) {
    case engine::dtype::f32:
    case engine::dtype::f16:
    case engine::dtype::bf16:
    case engine::dtype::i8: break;
    default: return false;
  }
  // Each factor is a positive int32, so the product fits in 128 bits; check
  // it against 1 GiB step by step to stay within 64.
  uint64_t bytes = engine::dtype_size(l.kv_dtype);
  for (int32_t f : {l.block_tokens, l.head_dim, 2, l.num_kv_heads, l.num_layers}) {
    bytes *= static_cast<uint64_t>(f);
    if (bytes > (uint64_t{1} << 30))
      return false;
  }
  return true;
}

std::string to_string(const block_key& k) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx:", static_cast<unsigned long long>(k.ns));
  return buf + engine::to_hex(k.hash);
}

caf::error validate_block(const block_key& key, const stored_block& b) {
  auto fail = [&](const std::string& what) {
    return make_kvstore_error(kvstore_errc::bad_block, "block " + to_string(key) + ": " + what);
  };
  if (!b.payload)
    return fail("no payload");
  if (b.meta.codec != block_codec::exact)
    return fail(std::string{"the store takes exact blocks, not "} + to_string(b.meta.codec));
  const auto& l = b.meta.layout;
  if (!layout_is_sane(l))
    return fail("bad layout (block_tokens " + std::to_string(l.block_tokens) + ", layers " +
                std::to_string(l.num_layers) + ", kv heads " + std::to_string(l.num_kv_heads) +
                ", head_dim " + std::to_string(l.head_dim) + ")");
  if (b.payload->size() != l.block_bytes())
    return fail("payload is " + std::to_string(b.payload->size()) + " bytes, layout needs " +
                std::to_string(l.block_bytes()));
  if (b.meta.token_count < 1 || b.meta.token_count > l.block_tokens)
    return fail("token_count " + std::to_string(b.meta.token_count) + " not in 1.." +
                std::to_string(l.block_tokens));
  if (!verify_block(b))
    return fail("checksum does not match the payload");
  if (auto bad = engine::check_kv_block(l, *b.payload))
    return fail(*bad);
  return {};
}

} // namespace tessera::kvstore
