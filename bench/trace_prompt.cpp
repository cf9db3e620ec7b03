#include "bench/trace_prompt.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string>

#include <caf/sec.hpp>

namespace tessera::bench {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

caf::error bad_range(std::string_view text, const std::string& why) {
  return caf::make_error(caf::sec::invalid_argument, "bad token range '" + std::string{text} + "': " + why);
}

} // namespace

caf::expected<token_range> parse_token_range(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos)
    return bad_range(text, "expected LO:HI");
  auto number = [&](std::string_view s, int32_t& v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc{} && end == s.data() + s.size() && !s.empty() && v >= 0;
  };
  token_range r;
  if (!number(text.substr(0, colon), r.lo) || !number(text.substr(colon + 1), r.hi))
    return bad_range(text, "LO and HI must be token ids in 0..2147483647");
  if (r.lo > r.hi)
    return bad_range(text, "LO must not be above HI");
  return r;
}

void append_block_tokens(int64_t hash_id, uint64_t seed, const token_range& range, int64_t count,
                         std::vector<int32_t>& out) {
  // The state depends on the id and the seed only, so a block's tokens are
  // the same wherever the id appears and whatever the block size.
  uint64_t state = static_cast<uint64_t>(hash_id) * 0xd6e8feb86659fd93ULL ^ seed;
  (void)splitmix64(state);
  const uint64_t span = static_cast<uint64_t>(range.hi) - static_cast<uint64_t>(range.lo) + 1;
  for (int64_t i = 0; i < count; ++i) {
    // Multiply-shift (Lemire): the top 32 bits scaled into [0, span).
    const uint64_t x = splitmix64(state) >> 32;
    out.push_back(range.lo + static_cast<int32_t>((x * span) >> 32));
  }
}

std::vector<int32_t> trace_prompt(const trace_request& r, int64_t block_tokens, uint64_t seed,
                                  const token_range& range) {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(r.input_length));
  for (int64_t id : r.hash_ids) {
    const int64_t left = r.input_length - static_cast<int64_t>(out.size());
    if (left <= 0)
      break;
    append_block_tokens(id, seed, range, std::min(left, block_tokens), out);
  }
  return out;
}

} // namespace tessera::bench
