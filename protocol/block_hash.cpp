#include "protocol/block_hash.hpp"

namespace tessera::protocol {

std::string to_hex(const kv_block_hash& h) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = digits[(h.hi >> (4 * i)) & 0xf];
    out[31 - i] = digits[(h.lo >> (4 * i)) & 0xf];
  }
  return out;
}

} // namespace tessera::protocol
