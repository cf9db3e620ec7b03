#pragma once
/// @file
/// The byte layout of blocks on disk (tier G3), independent of RocksDB so it
/// can be tested alone. Three column families:
///
///   "blocks": key   = u8 version (2) | be64 ns | be64 hash.hi | be64 hash.lo    25 bytes
///             value = header (80 bytes, little-endian) | payload
///   "order":  key   = be64 seq (insertion order, so keys sort oldest first)
///             value = u8 version (2) | be64 ns | be64 hash.hi | be64 hash.lo | le64 charged_bytes
///   default:  format_key -> format_value ("2"), written into a new store
///
/// Value header, little-endian:
///
///   off  size  field
///     0     4  magic "TKVB" (0x4256'4B54)
///     4     2  version (2)
///     6     2  header bytes (80)
///     8     8  ns            \ the key again, so a value found under
///    16    16  hash hi, lo   / the wrong key is caught
///    32    16  block_tokens, num_layers, num_kv_heads, head_dim (i32 each)
///    48     1  kv dtype (engine::dtype)
///    49     1  codec (block_codec: 0 exact, 1 int8), then 2 zero bytes
///    52     4  token_count (i32)
///    56     8  payload bytes
///    64     8  payload checksum (XXH3_64 seed 0 = block_meta::checksum)
///    72     8  XXH3_64 (seed 0) of header bytes 0..71
///
/// The payload is encoded_payload_bytes(layout, codec) bytes.
///
/// Format 1 (64-bit XXH3 block hashes, 17-byte keys, 72-byte headers) is
/// not read: its blocks are named by another function, so none could ever
/// match. A store without the format key that holds blocks, or with
/// another format, fails to open and the disk tier is reset
/// (disk_recovery.hpp), named as such in the report.
///
/// A value cut short (a torn write), one whose header or payload changed,
/// or one of another version fails decode_value and is never served.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvstore/block.hpp"

namespace tessera::kvstore::disk_codec {

/// Name of the column family holding block values.
inline constexpr std::string_view blocks_cf = "blocks";
/// Name of the column family holding the insertion-order index.
inline constexpr std::string_view order_cf = "order";

/// The key, in the default column family, of the store's format.
inline constexpr std::string_view format_key = "tessera.kv-disk-format";
/// The format this build writes and reads (128-bit block hashes).
inline constexpr std::string_view format_value = "2";

/// Version byte of block keys and order values.
inline constexpr uint8_t key_version = 2;
/// Bytes of an encoded block key.
inline constexpr size_t key_bytes = 25;
/// "TKVB" read as a little-endian u32.
inline constexpr uint32_t value_magic = 0x42564B54u;
/// Version of the value header.
inline constexpr uint16_t value_version = 2;
/// Bytes of the value header.
inline constexpr size_t header_bytes = 80;
/// Bytes of an encoded order value.
inline constexpr size_t order_value_bytes = 33;

/// The "blocks" key of `k`.
[[nodiscard]] std::string encode_key(const block_key& k);
/// Parses a "blocks" key; nullopt when malformed.
[[nodiscard]] std::optional<block_key> decode_key(std::string_view bytes);

/// The value header for a block `meta` with `payload_bytes` of payload,
/// stored under `k`. The value is this header followed by the payload.
[[nodiscard]] std::string encode_header(const block_key& k, const block_meta& meta,
                                        size_t payload_bytes);

/// Header + payload of `b` under `k`, as one string (tests, tools).
[[nodiscard]] std::string encode_value(const block_key& k, const stored_block& b);

/// Why a value was refused.
enum class decode_status : uint8_t {
  ok,
  /// Shorter than a header.
  too_short,
  /// Wrong magic or header size.
  bad_magic,
  /// A version this code does not read.
  bad_version,
  /// The header's own checksum does not match.
  bad_header_checksum,
  /// The header names another key.
  wrong_key,
  /// Impossible layout, token count or codec.
  bad_layout,
  /// Payload length differs from the header's or the layout's (as encoded).
  bad_size,
  /// The payload does not match its checksum.
  bad_checksum,
};

/// Name of `s`, e.g. "bad_checksum".
const char* to_string(decode_status s);

/// A decoded value: a block when status is ok.
struct decoded_value {
  decode_status status = decode_status::too_short;
  stored_block block;
};

/// Decodes and fully verifies a value read under `expected`; copies the
/// payload into a new block.
[[nodiscard]] decoded_value decode_value(const block_key& expected, std::string_view bytes);

/// The "order" key of sequence number `seq`.
[[nodiscard]] std::string encode_order_key(uint64_t seq);
/// Parses an "order" key; nullopt when malformed.
[[nodiscard]] std::optional<uint64_t> decode_order_key(std::string_view bytes);

/// One entry of the insertion-order index.
struct order_entry {
  block_key key;
  /// Bytes charged against the disk capacity for the block.
  uint64_t charged_bytes = 0;
};

/// The "order" value for a block `k` charged `charged_bytes`.
[[nodiscard]] std::string encode_order_value(const block_key& k, uint64_t charged_bytes);
/// Parses an "order" value; nullopt when malformed.
[[nodiscard]] std::optional<order_entry> decode_order_value(std::string_view bytes);

} // namespace tessera::kvstore::disk_codec
