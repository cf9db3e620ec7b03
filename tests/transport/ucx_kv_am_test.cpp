// The rendezvous KV path's pure parts: merging blocks into runs, the block
// header and batch notice layouts with the receiver's checks, and the
// choice of path from the configuration.

#include "transport/ucx/ucx_kv_am.hpp"
#include "transport/ucx/ucx_kv_path.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace tessera::transport::detail {
namespace {

TEST(UcxKvAmTest, MergesBlocksContiguousOnBothSidesIntoOneRun) {
  std::vector<block_copy> blocks = {
    {1, 0, 2, 100, 10},
    {1, 10, 2, 110, 20},  // continues both: merged
    {1, 30, 2, 200, 5},   // gap in the destination: new run
    {1, 35, 2, 205, 5},   // continues that one
    {3, 40, 2, 210, 5},   // other source region: new run
    {3, 0, 2, 215, 5},    // source goes backwards: new run
  };
  auto runs = kv_runs(blocks);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].size, 30u);
  EXPECT_EQ(runs[0].first_block, 0u);
  EXPECT_EQ(runs[0].block_count, 2u);
  EXPECT_EQ(runs[1].dst_offset, 200u);
  EXPECT_EQ(runs[1].size, 10u);
  EXPECT_EQ(runs[1].block_count, 2u);
  EXPECT_EQ(runs[2].src, 3u);
  EXPECT_EQ(runs[3].first_block, 5u);
  EXPECT_TRUE(kv_runs({}).empty());
}

TEST(UcxKvAmTest, BlockHeaderRoundTripsAndRejectsOtherLengths) {
  kv_block_header h{7, 3, 2, uint64_t{1} << 40, 65536};
  std::vector<std::byte> buf(kv_block_header_bytes + 1);
  encode_block_header(h, buf.data());
  auto d = decode_block_header(buf.data(), kv_block_header_bytes);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->seq, 7u);
  EXPECT_EQ(d->run, 3u);
  EXPECT_EQ(d->dst, 2u);
  EXPECT_EQ(d->dst_offset, uint64_t{1} << 40);
  EXPECT_EQ(d->size, 65536u);
  EXPECT_FALSE(decode_block_header(buf.data(), kv_block_header_bytes - 1));
  EXPECT_FALSE(decode_block_header(buf.data(), kv_block_header_bytes + 1));
  EXPECT_FALSE(decode_block_header(nullptr, 0));
}

TEST(UcxKvAmTest, ReceiverRefusesUnknownRegionsAndRangesOutsideTheRegion) {
  const uint64_t region = 1 << 20;
  kv_block_header ok{1, 0, 4, region - 4096, 4096};
  EXPECT_EQ(check_block_target(ok, region, 4096), "");

  auto unknown = check_block_target(ok, std::nullopt, 4096);
  EXPECT_NE(unknown.find("unknown region 4"), std::string::npos) << unknown;

  kv_block_header past = ok;
  past.dst_offset = region - 10;
  auto out = check_block_target(past, region, 4096);
  EXPECT_NE(out.find("outside region 4"), std::string::npos) << out;

  // An offset + size that wraps around 2^64 must not pass as "small".
  kv_block_header wrap{1, 0, 4, std::numeric_limits<uint64_t>::max() - 100, 4096};
  EXPECT_NE(check_block_target(wrap, region, 4096), "");
  kv_block_header start_past{1, 0, 4, region + 1, 1};
  EXPECT_NE(check_block_target(start_past, region, 1), "");

  kv_block_header empty{1, 0, 4, 0, 0};
  EXPECT_NE(check_block_target(empty, region, 0), "");
  // The message must carry exactly what the header promises.
  auto mismatch = check_block_target(ok, region, 4095);
  EXPECT_NE(mismatch.find("4095"), std::string::npos) << mismatch;
}

TEST(UcxKvAmTest, BatchNoticeRoundTripsAndRejectsMalformedOnes) {
  kv_batch_notice n;
  n.seq = 9;
  n.runs = 2;
  n.batch.batch_id = 1234;
  n.batch.blocks = {{1, 0, 2, 0, 10}, {1, 10, 2, 50, 10}};
  writer w;
  encode_batch_notice(w, n);
  reader rd{w.out.data(), w.out.size()};
  auto d = decode_batch_notice(rd);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->seq, 9u);
  EXPECT_EQ(d->runs, 2u);
  EXPECT_EQ(d->batch.batch_id, 1234u);
  ASSERT_EQ(d->batch.blocks.size(), 2u);
  EXPECT_EQ(d->batch.blocks[1].dst_offset, 50u);

  // Truncated, with trailing bytes, more runs than blocks, no runs.
  reader short_rd{w.out.data(), w.out.size() - 1};
  EXPECT_FALSE(decode_batch_notice(short_rd));
  auto longer = w.out;
  longer.push_back(std::byte{0});
  reader long_rd{longer.data(), longer.size()};
  EXPECT_FALSE(decode_batch_notice(long_rd));
  for (uint32_t runs : {0u, 3u}) {
    auto bad = n;
    bad.runs = runs;
    writer bw;
    encode_batch_notice(bw, bad);
    reader brd{bw.out.data(), bw.out.size()};
    EXPECT_FALSE(decode_batch_notice(brd)) << runs << " runs";
  }
  // A block count far beyond the bytes present is refused before any
  // allocation.
  writer huge;
  huge.put<uint64_t>(1);
  huge.put<uint64_t>(1);
  huge.put<uint32_t>(1);
  huge.put<uint32_t>(0xffffffffu);
  reader hrd{huge.out.data(), huge.out.size()};
  EXPECT_FALSE(decode_batch_notice(hrd));
}

TEST(UcxKvAmTest, BatchAckRoundTrips) {
  writer w;
  encode_batch_ack(w, kv_batch_ack{5, false, "run 1: unknown region 9"});
  reader rd{w.out.data(), w.out.size()};
  auto a = decode_batch_ack(rd);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->seq, 5u);
  EXPECT_FALSE(a->ok);
  EXPECT_EQ(a->why, "run 1: unknown region 9");
  reader short_rd{w.out.data(), w.out.size() - 1};
  EXPECT_FALSE(decode_batch_ack(short_rd));
}

TEST(UcxKvPathTest, AutomaticPicksPutOnlyForSharedMemoryWithoutErrorHandling) {
  using p = ucx_kv_path;
  auto resolve = [](p option, const std::string& tls, const char* env_tls, bool err_peer,
                    const char* env_override = nullptr) {
    auto r = resolve_kv_path(option, tls, env_tls, env_override, err_peer);
    EXPECT_TRUE(r);
    return r ? *r : p::automatic;
  };
  EXPECT_EQ(resolve(p::automatic, "tcp", nullptr, true), p::am_rndv);
  EXPECT_EQ(resolve(p::automatic, "tcp", nullptr, false), p::am_rndv);
  // UCX 1.13 drops shared memory under peer error handling.
  EXPECT_EQ(resolve(p::automatic, "sm,self,tcp", nullptr, true), p::am_rndv);
  EXPECT_EQ(resolve(p::automatic, "sm,self,tcp", nullptr, false), p::put);
  EXPECT_EQ(resolve(p::automatic, "cma,sysv,tcp", nullptr, false), p::put);
  EXPECT_EQ(resolve(p::automatic, "sysv,posix,tcp", nullptr, false), p::am_rndv);
  // The option's list wins over UCX_TLS; UCX's default is everything.
  EXPECT_EQ(resolve(p::automatic, "tcp", "sm,tcp", false), p::am_rndv);
  EXPECT_EQ(resolve(p::automatic, "", "sm,tcp", false), p::put);
  EXPECT_EQ(resolve(p::automatic, "", nullptr, false), p::put);
  EXPECT_EQ(resolve(p::automatic, "^tcp", nullptr, false), p::put);
  EXPECT_EQ(resolve(p::automatic, "^sm", nullptr, false), p::am_rndv);
  // Explicit choices and the environment's override.
  EXPECT_EQ(resolve(p::put, "tcp", nullptr, true), p::put);
  EXPECT_EQ(resolve(p::am_rndv, "sm", nullptr, false), p::am_rndv);
  EXPECT_EQ(resolve(p::automatic, "tcp", nullptr, true, "put"), p::put);
  EXPECT_EQ(resolve(p::automatic, "sm", nullptr, false, "am_rndv"), p::am_rndv);
  EXPECT_EQ(resolve(p::put, "tcp", nullptr, true, "am_rndv"), p::put);
  auto bad = resolve_kv_path(p::automatic, "tcp", nullptr, "rdma", true);
  ASSERT_FALSE(bad);
  EXPECT_NE(to_string(bad.error()).find("rdma"), std::string::npos);
}

TEST(UcxKvPathTest, NamesRoundTrip) {
  for (auto path : {ucx_kv_path::automatic, ucx_kv_path::put, ucx_kv_path::am_rndv})
    EXPECT_EQ(parse_kv_path(to_string(path)), path);
  EXPECT_FALSE(parse_kv_path("rndv"));
}

TEST(UcxKvPathTest, RendezvousPaysForRunsOfAtLeastTheThreshold) {
  constexpr uint64_t kib = 1024;
  // Four contiguous 64 KiB blocks: one 256 KiB run.
  std::vector<block_copy> contiguous;
  for (uint64_t i = 0; i < 4; ++i)
    contiguous.push_back({1, i * 64 * kib, 2, i * 64 * kib, 64 * kib});
  EXPECT_TRUE(rndv_pays(kv_runs(contiguous), 256 * kib));
  EXPECT_FALSE(rndv_pays(kv_runs(contiguous), 256 * kib + 1));
  // The same blocks in reverse order in the destination: four 64 KiB runs.
  auto scattered = contiguous;
  for (uint64_t i = 0; i < 4; ++i)
    scattered[i].dst_offset = (3 - i) * 64 * kib;
  EXPECT_FALSE(rndv_pays(kv_runs(scattered), 256 * kib));
  EXPECT_TRUE(rndv_pays(kv_runs(scattered), 64 * kib));
  // One 1 MiB block: one run.
  EXPECT_TRUE(rndv_pays(kv_runs({{1, 0, 2, 0, 1024 * kib}}), 256 * kib));
  EXPECT_FALSE(rndv_pays({}, 0));
}

} // namespace
} // namespace tessera::transport::detail
