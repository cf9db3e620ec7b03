#pragma once
/// @file
/// SipHash-2-4 with 128-bit output (Aumasson and Bernstein, "SipHash: a
/// fast short-input PRF", and the reference implementation's
/// vectors_sip128): a keyed pseudo-random function, fast on the short
/// inputs the KV block hash feeds it (16 bytes of parent + one block of
/// token ids). Without the key an adversary can neither predict an output
/// nor build two inputs with the same one, which an unkeyed or publicly
/// seeded hash (XXH3) cannot promise.
///
/// Bytes are read little-endian, as the reference does; the 16-byte
/// output is le64(first) || le64(second).

#include <cstddef>
#include <cstdint>

namespace tessera::engine {

/// A SipHash key: k0 = le64(key bytes 0..7), k1 = le64(key bytes 8..15).
struct siphash_key {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
  friend bool operator==(const siphash_key&, const siphash_key&) = default;
};

/// The two output words: the digest's bytes are le64(first) || le64(second).
struct siphash_digest {
  uint64_t first = 0;
  uint64_t second = 0;
};

/// Incremental SipHash-2-4-128: update() any number of times, then final()
/// once. Equal byte streams give equal digests however they are split.
class siphash128 {
public:
  explicit siphash128(const siphash_key& key);
  void update(const void* data, size_t size);
  [[nodiscard]] siphash_digest final();

private:
  void compress(uint64_t m);

  uint64_t v0_, v1_, v2_, v3_;
  uint64_t tail_ = 0;     // pending bytes, little-endian, tail_bytes_ of them
  unsigned tail_bytes_ = 0;
  uint64_t total_ = 0;    // bytes seen, mod 256 enters the last word
};

/// SipHash-2-4-128 of `size` bytes at `data`.
[[nodiscard]] siphash_digest siphash128_of(const siphash_key& key, const void* data, size_t size);

} // namespace tessera::engine
