#include "engine/siphash.hpp"

#include <bit>
#include <cstring>

namespace tessera::engine {

namespace {

static_assert(std::endian::native == std::endian::little,
              "siphash reads words with memcpy, which is little-endian only here");

inline void sip_round(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1;
  v1 = std::rotl(v1, 13);
  v1 ^= v0;
  v0 = std::rotl(v0, 32);
  v2 += v3;
  v3 = std::rotl(v3, 16);
  v3 ^= v2;
  v0 += v3;
  v3 = std::rotl(v3, 21);
  v3 ^= v0;
  v2 += v1;
  v1 = std::rotl(v1, 17);
  v1 ^= v2;
  v2 = std::rotl(v2, 32);
}

} // namespace

siphash128::siphash128(const siphash_key& key)
  : v0_(key.k0 ^ 0x736f6d6570736575ull), v1_(key.k1 ^ 0x646f72616e646f6dull ^ 0xeeull),
    v2_(key.k0 ^ 0x6c7967656e657261ull), v3_(key.k1 ^ 0x7465646279746573ull) {}

void siphash128::compress(uint64_t m) {
  v3_ ^= m;
  sip_round(v0_, v1_, v2_, v3_); // c = 2 compression rounds
  sip_round(v0_, v1_, v2_, v3_);
  v0_ ^= m;
}

void siphash128::update(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += size;
  // Complete a pending partial word first.
  while (tail_bytes_ != 0 && size != 0) {
    tail_ |= static_cast<uint64_t>(*p++) << (8 * tail_bytes_);
    --size;
    if (++tail_bytes_ == 8) {
      compress(tail_);
      tail_ = 0;
      tail_bytes_ = 0;
    }
  }
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t m;
    std::memcpy(&m, p, 8);
    compress(m);
  }
  for (; size != 0; --size)
    tail_ |= static_cast<uint64_t>(*p++) << (8 * tail_bytes_++);
}

siphash_digest siphash128::final() {
  compress(tail_ | (total_ << 56));
  siphash_digest d;
  v2_ ^= 0xee;
  for (int i = 0; i < 4; ++i) // d = 4 finalization rounds
    sip_round(v0_, v1_, v2_, v3_);
  d.first = v0_ ^ v1_ ^ v2_ ^ v3_;
  v1_ ^= 0xdd;
  for (int i = 0; i < 4; ++i)
    sip_round(v0_, v1_, v2_, v3_);
  d.second = v0_ ^ v1_ ^ v2_ ^ v3_;
  return d;
}

siphash_digest siphash128_of(const siphash_key& key, const void* data, size_t size) {
  siphash128 h{key};
  h.update(data, size);
  return h.final();
}

} // namespace tessera::engine
