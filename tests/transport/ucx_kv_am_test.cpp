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

/// Run 0's header of a folded batch carrying `n`, as the sender writes it.
std::vector<std::byte> folded_header(const kv_block_header& h, const kv_batch_notice& n) {
  writer w;
  encode_batch_notice(w, n);
  std::vector<std::byte> out(kv_block_header_bytes + w.out.size());
  encode_folded_header(h, w.out, out.data());
  return out;
}

kv_batch_notice one_run_notice(uint64_t seq) {
  kv_batch_notice n;
  n.seq = seq;
  n.runs = 1;
  n.batch.batch_id = 77;
  n.batch.blocks = {{1, 0, 2, 4096, 65536}};
  return n;
}

TEST(UcxKvAmTest, FoldedRunHeaderCarriesTheNoticeAndAPlainOneDoesNot) {
  const kv_block_header h{11, 0, 2, 4096, 65536};
  auto buf = folded_header(h, one_run_notice(11));
  auto r = decode_run_header(buf.data(), buf.size());
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->folded);
  EXPECT_EQ(r->block.seq, 11u);
  EXPECT_EQ(r->block.dst_offset, 4096u);
  EXPECT_EQ(r->block.size, 65536u);
  ASSERT_TRUE(r->notice);
  EXPECT_EQ(r->notice->seq, 11u);
  EXPECT_EQ(r->notice->runs, 1u);
  EXPECT_EQ(r->notice->batch.batch_id, 77u);
  ASSERT_EQ(r->notice->batch.blocks.size(), 1u);
  EXPECT_EQ(r->notice->batch.blocks[0].dst_offset, 4096u);

  // A run without a notice: the block header alone, not folded.
  auto plain = decode_run_header(buf.data(), kv_block_header_bytes);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->folded);
  EXPECT_FALSE(plain->notice);
  EXPECT_EQ(plain->block.seq, 11u);
}

TEST(UcxKvAmTest, MalformedFoldedNoticesAreMarkedForRejection) {
  const kv_block_header h{11, 0, 2, 4096, 65536};
  // Each of these has a good block header and a bad notice after it: the
  // receiver knows the batch to reject (folded, no notice).
  auto expect_bad_notice = [](const std::vector<std::byte>& buf, const char* what) {
    auto r = decode_run_header(buf.data(), buf.size());
    ASSERT_TRUE(r) << what;
    EXPECT_TRUE(r->folded) << what;
    EXPECT_FALSE(r->notice) << what;
    EXPECT_EQ(r->block.seq, 11u) << what;
  };
  auto good = folded_header(h, one_run_notice(11));
  // Truncated: one byte of the notice missing, or only one byte of it.
  expect_bad_notice({good.begin(), good.end() - 1}, "truncated");
  expect_bad_notice({good.begin(), good.begin() + kv_block_header_bytes + 1}, "one byte");
  // Trailing bytes after the notice.
  auto longer = good;
  longer.push_back(std::byte{0});
  expect_bad_notice(longer, "trailing byte");
  // More runs than blocks, and no runs.
  for (uint32_t runs : {0u, 2u, 0xffffffffu}) {
    auto n = one_run_notice(11);
    n.runs = runs;
    expect_bad_notice(folded_header(h, n), "run count");
  }
  // A block count beyond the bytes present.
  {
    writer w;
    w.put<uint64_t>(11);
    w.put<uint64_t>(77);
    w.put<uint32_t>(1);
    w.put<uint32_t>(0xffffffffu);
    std::vector<std::byte> buf(kv_block_header_bytes + w.out.size());
    encode_folded_header(h, w.out, buf.data());
    expect_bad_notice(buf, "block count");
  }
  // Another batch's notice, or a notice on a run other than run 0.
  expect_bad_notice(folded_header(h, one_run_notice(12)), "other seq");
  auto h1 = h;
  h1.run = 1;
  auto n2 = one_run_notice(11);
  n2.runs = 2;
  n2.batch.blocks.push_back({1, 65536, 2, 0, 4096});
  auto r1 = folded_header(h1, n2);
  auto d1 = decode_run_header(r1.data(), r1.size());
  ASSERT_TRUE(d1);
  EXPECT_TRUE(d1->folded);
  EXPECT_FALSE(d1->notice) << "a notice on run 1";
}

TEST(UcxKvAmTest, RunHeadersShorterThanABlockHeaderOrOverTheFoldLimitAreRefused) {
  const kv_block_header h{11, 0, 2, 0, 4096};
  EXPECT_FALSE(decode_run_header(nullptr, 0));
  std::vector<std::byte> buf(kv_block_header_bytes + kv_folded_notice_max_bytes + 1);
  encode_block_header(h, buf.data());
  EXPECT_FALSE(decode_run_header(buf.data(), kv_block_header_bytes - 1));
  EXPECT_FALSE(decode_run_header(buf.data(), buf.size())) << "one byte over the limit";
  // The largest notice that fits: 31 blocks.
  kv_batch_notice n;
  n.seq = 11;
  n.runs = 31;
  for (uint64_t i = 0; i < 31; ++i)
    n.batch.blocks.push_back({1, i * 4096, 2, (30 - i) * 4096, 4096});
  auto fits = folded_header(h, n);
  EXPECT_LE(fits.size(), kv_block_header_bytes + kv_folded_notice_max_bytes);
  auto d = decode_run_header(fits.data(), fits.size());
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->notice);
  EXPECT_EQ(d->notice->batch.blocks.size(), 31u);
  n.runs = 32;
  n.batch.blocks.push_back({1, 31 * 4096, 2, 31 * 4096, 4096});
  auto over = folded_header(h, n);
  EXPECT_GT(over.size(), kv_block_header_bytes + kv_folded_notice_max_bytes);
  EXPECT_FALSE(decode_run_header(over.data(), over.size()));
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

TEST(UcxKvAmTest, LandedAcksRoundTripAndRejectMalformedOnes) {
  const std::vector<uint64_t> seqs = {3, 4, 9, uint64_t{1} << 40};
  writer w;
  encode_landed_acks(w, seqs);
  reader rd{w.out.data(), w.out.size()};
  auto d = decode_landed_acks(rd);
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, seqs);
  // Truncated, trailing bytes, none at all, a count beyond the bytes.
  reader short_rd{w.out.data(), w.out.size() - 1};
  EXPECT_FALSE(decode_landed_acks(short_rd));
  auto longer = w.out;
  longer.push_back(std::byte{0});
  reader long_rd{longer.data(), longer.size()};
  EXPECT_FALSE(decode_landed_acks(long_rd));
  writer none;
  encode_landed_acks(none, {});
  reader none_rd{none.out.data(), none.out.size()};
  EXPECT_FALSE(decode_landed_acks(none_rd));
  writer huge;
  huge.put<uint32_t>(0xffffffffu);
  huge.put<uint64_t>(1);
  reader huge_rd{huge.out.data(), huge.out.size()};
  EXPECT_FALSE(decode_landed_acks(huge_rd));
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
