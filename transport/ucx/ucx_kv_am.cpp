// The rendezvous KV path's byte layout, run merging and receive-side checks.

#include "transport/ucx/ucx_kv_am.hpp"

#include <cstring>

namespace tessera::transport::detail {

std::vector<kv_run> kv_runs(const std::vector<block_copy>& blocks) {
  std::vector<kv_run> runs;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    if (!runs.empty()) {
      auto& r = runs.back();
      if (b.src == r.src && b.dst == r.dst && b.src_offset == r.src_offset + r.size
          && b.dst_offset == r.dst_offset + r.size) {
        r.size += b.size;
        ++r.block_count;
        continue;
      }
    }
    runs.push_back(kv_run{b.src, b.src_offset, b.dst, b.dst_offset, b.size,
                          static_cast<uint32_t>(i), 1});
  }
  return runs;
}

bool rndv_pays(const std::vector<kv_run>& runs, uint64_t min_run_bytes) {
  if (runs.empty())
    return false;
  uint64_t bytes = 0;
  for (const auto& r : runs)
    bytes += r.size;
  return bytes >= min_run_bytes * runs.size();
}

void encode_block_header(const kv_block_header& h, std::byte* out) {
  auto put = [&out](const auto& v) {
    std::memcpy(out, &v, sizeof(v));
    out += sizeof(v);
  };
  put(h.seq);
  put(h.run);
  put(h.dst);
  put(h.dst_offset);
  put(h.size);
}

std::optional<kv_block_header> decode_block_header(const void* data, size_t length) {
  if (data == nullptr || length != kv_block_header_bytes)
    return std::nullopt;
  reader rd{static_cast<const std::byte*>(data), length};
  kv_block_header h;
  h.seq = rd.get<uint64_t>();
  h.run = rd.get<uint32_t>();
  h.dst = rd.get<uint32_t>();
  h.dst_offset = rd.get<uint64_t>();
  h.size = rd.get<uint64_t>();
  if (!rd.ok)
    return std::nullopt;
  return h;
}

std::string check_block_target(const kv_block_header& h, std::optional<uint64_t> region_bytes,
                               size_t data_length) {
  if (!region_bytes)
    return "unknown region " + std::to_string(h.dst);
  if (h.size == 0)
    return "empty run";
  if (h.size != data_length)
    return "header says " + std::to_string(h.size) + " bytes, message carries "
           + std::to_string(data_length);
  // Written so that no sum can wrap around.
  if (h.dst_offset > *region_bytes || h.size > *region_bytes - h.dst_offset) {
    std::string r{"destination range of "};
    r += std::to_string(h.size);
    r += " bytes at offset ";
    r += std::to_string(h.dst_offset);
    r += " outside region ";
    r += std::to_string(h.dst);
    r += " of ";
    r += std::to_string(*region_bytes);
    r += " bytes";
    return r;
  }
  return {};
}

void put_block_copy(writer& w, const block_copy& b) {
  w.put<uint32_t>(b.src);
  w.put<uint64_t>(b.src_offset);
  w.put<uint32_t>(b.dst);
  w.put<uint64_t>(b.dst_offset);
  w.put<uint64_t>(b.size);
}

block_copy get_block_copy(reader& rd) {
  block_copy c;
  c.src = rd.get<uint32_t>();
  c.src_offset = rd.get<uint64_t>();
  c.dst = rd.get<uint32_t>();
  c.dst_offset = rd.get<uint64_t>();
  c.size = rd.get<uint64_t>();
  return c;
}

void encode_batch_notice(writer& w, const kv_batch_notice& n) {
  w.put<uint64_t>(n.seq);
  w.put<uint64_t>(n.batch.batch_id);
  w.put<uint32_t>(n.runs);
  w.put<uint32_t>(static_cast<uint32_t>(n.batch.blocks.size()));
  for (const auto& b : n.batch.blocks)
    put_block_copy(w, b);
}

std::optional<kv_batch_notice> decode_batch_notice(reader& rd) {
  kv_batch_notice n;
  n.seq = rd.get<uint64_t>();
  n.batch.batch_id = rd.get<uint64_t>();
  n.runs = rd.get<uint32_t>();
  auto count = rd.get<uint32_t>();
  // Checked before reserving: a bogus count must not allocate.
  if (!rd.ok || count > rd.n / block_copy_bytes)
    return std::nullopt;
  n.batch.blocks.reserve(count);
  for (uint32_t i = 0; i < count; ++i)
    n.batch.blocks.push_back(get_block_copy(rd));
  if (!rd.ok || rd.n != 0 || n.runs == 0 || n.runs > count)
    return std::nullopt;
  return n;
}

void encode_folded_header(const kv_block_header& h, std::span<const std::byte> notice,
                          std::byte* out) {
  encode_block_header(h, out);
  if (!notice.empty())
    std::memcpy(out + kv_block_header_bytes, notice.data(), notice.size());
}

std::optional<kv_run_header> decode_run_header(const void* data, size_t length) {
  if (data == nullptr || length < kv_block_header_bytes
      || length - kv_block_header_bytes > kv_folded_notice_max_bytes)
    return std::nullopt;
  kv_run_header r;
  auto block = decode_block_header(data, kv_block_header_bytes);
  if (!block)
    return std::nullopt;
  r.block = *block;
  if (length == kv_block_header_bytes)
    return r;
  r.folded = true;
  reader rd{static_cast<const std::byte*>(data) + kv_block_header_bytes,
            length - kv_block_header_bytes};
  auto n = decode_batch_notice(rd);
  // Only run 0 carries the notice, and only its own batch's.
  if (n && n->seq == r.block.seq && r.block.run == 0)
    r.notice = std::move(n);
  return r;
}

void encode_landed_acks(writer& w, std::span<const uint64_t> seqs) {
  w.put<uint32_t>(static_cast<uint32_t>(seqs.size()));
  w.bytes(seqs.data(), seqs.size() * sizeof(uint64_t));
}

std::optional<std::vector<uint64_t>> decode_landed_acks(reader& rd) {
  auto count = rd.get<uint32_t>();
  if (!rd.ok || count == 0 || count > rd.n / sizeof(uint64_t))
    return std::nullopt;
  std::vector<uint64_t> seqs;
  seqs.reserve(count);
  for (uint32_t i = 0; i < count; ++i)
    seqs.push_back(rd.get<uint64_t>());
  if (!rd.ok || rd.n != 0)
    return std::nullopt;
  return seqs;
}

void encode_batch_ack(writer& w, const kv_batch_ack& a) {
  w.put<uint64_t>(a.seq);
  w.put<uint8_t>(a.ok ? 1 : 0);
  w.put<uint32_t>(static_cast<uint32_t>(a.why.size()));
  w.bytes(a.why.data(), a.why.size());
}

std::optional<kv_batch_ack> decode_batch_ack(reader& rd) {
  kv_batch_ack a;
  a.seq = rd.get<uint64_t>();
  a.ok = rd.get<uint8_t>() != 0;
  auto len = rd.get<uint32_t>();
  auto* text = rd.take(len);
  if (!rd.ok || rd.n != 0)
    return std::nullopt;
  a.why.assign(reinterpret_cast<const char*>(text), len);
  return a;
}

} // namespace tessera::transport::detail
