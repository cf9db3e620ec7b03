#include "engine/safetensors.hpp"

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace tessera::engine;
using tessera::error_message;
namespace fs = std::filesystem;

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span{v});
}

/// Writes `header` behind an 8-byte length (`declared_len`, or the header's
/// size), followed by `data_bytes` bytes of 0xAB.
void write_raw(const fs::path& path, const std::string& header, size_t data_bytes,
               std::optional<uint64_t> declared_len = std::nullopt) {
  std::ofstream out{path, std::ios::binary};
  uint64_t len = declared_len.value_or(header.size());
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << header;
  out << std::string(data_bytes, '\xab');
}

/// Opens `path` expecting failure with `code`; returns the message, which
/// must name the file.
std::string open_error(const fs::path& path, engine_errc code) {
  auto f = safetensors_file::open(path);
  EXPECT_FALSE(static_cast<bool>(f));
  if (f)
    return {};
  EXPECT_TRUE(f.error() == code) << tessera::error_text(f.error());
  auto msg = error_message(f.error());
  EXPECT_EQ(msg.rfind(path.string() + ": ", 0), 0u) << msg;
  return msg;
}

#define EXPECT_CONTAINS(haystack, needle)                                                      \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

class SafetensorsTest : public ::testing::Test {
protected:
  tessera::test::temp_dir dir_;
  fs::path file_ = dir_.path() / "t.safetensors";
};

TEST_F(SafetensorsTest, RoundTripsDtypesShapesScalarsAndEmptyTensors) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {f32_to_bf16(0.5f), f32_to_bf16(-1), f32_to_bf16(2), 0};
  std::vector<uint16_t> c = {f32_to_f16(1.5f), f32_to_f16(-2), f32_to_f16(3)}; // 6 bytes
  std::vector<float> scalar = {42.0f};
  std::vector<uint16_t> empty;
  std::vector<tensor_to_write> ts = {
    {"a", dtype::f32, {2, 3}, bytes_of(a)},
    {"b.weight", dtype::bf16, {4}, bytes_of(b)},
    {"c", dtype::f16, {3, 1}, bytes_of(c)},
    {"scalar", dtype::f32, {}, bytes_of(scalar)},
    {"empty", dtype::bf16, {0, 5}, bytes_of(empty)},
  };
  ASSERT_FALSE(write_safetensors(file_, ts, {{"format", "pt"}, {"note", "hi"}}));
  EXPECT_FALSE(fs::exists(file_.string() + ".tmp"));

  auto f = safetensors_file::open(file_);
  ASSERT_TRUE(f) << tessera::error_text(f.error());
  EXPECT_EQ(f->path(), file_);
  EXPECT_EQ(f->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "hi"}}));
  ASSERT_EQ(f->tensors().size(), 5u);
  // File order is write order.
  for (size_t i = 0; i < ts.size(); ++i)
    EXPECT_EQ(f->tensors()[i].name, ts[i].name) << i;
  for (const auto& want : ts) {
    const auto* t = f->find(want.name);
    ASSERT_NE(t, nullptr) << want.name;
    EXPECT_EQ(t->type, want.type) << want.name;
    EXPECT_EQ(t->shape, want.shape) << want.name;
    ASSERT_EQ(t->size_bytes, want.bytes.size()) << want.name;
    if (!want.bytes.empty()) { // memcmp may not see the null data() of an empty vector
      EXPECT_EQ(std::memcmp(t->data, want.bytes.data(), want.bytes.size()), 0) << want.name;
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 8, 0u) << want.name << " is unaligned";
  }
  EXPECT_EQ(f->find("scalar")->numel(), 1);
  EXPECT_EQ(f->find("empty")->numel(), 0);
  EXPECT_EQ(f->find("nope"), nullptr);
}

TEST_F(SafetensorsTest, PadsHeaderToEightBytesAndPacksAlignedTensorsTightly) {
  std::vector<float> a(6, 1.0f), b(2, 2.0f);
  std::vector<tensor_to_write> ts = {{"x", dtype::f32, {6}, bytes_of(a)},
                                     {"y", dtype::f32, {2}, bytes_of(b)}};
  ASSERT_FALSE(write_safetensors(file_, ts));
  std::ifstream in{file_, std::ios::binary};
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  EXPECT_EQ(len % 8, 0u);
  std::string header(len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(len));
  EXPECT_EQ(header.front(), '{');
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'));
  // No gaps and no trailing bytes: what the Hugging Face reader demands.
  EXPECT_EQ(fs::file_size(file_), 8 + len + 32);
}

TEST_F(SafetensorsTest, StreamedWriterFillsChunksInOrder) {
  // 3 MiB of f32, so the filler sees several chunks.
  const int64_t n = 3 * 1024 * 256 + 3;
  std::vector<tensor_spec> specs = {{"big", dtype::f32, {n}}, {"tail", dtype::bf16, {1}}};
  size_t calls = 0;
  auto err = write_safetensors_streamed(
    file_, specs, [&](size_t index, size_t offset, std::span<std::byte> out) {
      ++calls;
      auto* p = reinterpret_cast<float*>(out.data());
      for (size_t i = 0; i < out.size() / dtype_size(specs[index].type); ++i) {
        if (index == 0)
          p[i] = static_cast<float>(offset / 4 + i);
        else
          reinterpret_cast<uint16_t*>(out.data())[i] = f32_to_bf16(7.0f);
      }
    });
  ASSERT_FALSE(err) << tessera::error_text(err);
  EXPECT_GE(calls, 4u);
  auto f = safetensors_file::open(file_);
  ASSERT_TRUE(f) << tessera::error_text(f.error());
  const auto* big = reinterpret_cast<const float*>(f->find("big")->data);
  for (int64_t i = 0; i < n; i += 4099)
    ASSERT_EQ(big[i], static_cast<float>(i));
  EXPECT_EQ(big[n - 1], static_cast<float>(n - 1));
  EXPECT_EQ(bf16_to_f32(*reinterpret_cast<const uint16_t*>(f->find("tail")->data)), 7.0f);
}

TEST_F(SafetensorsTest, WriterRejectsBytesThatDoNotMatchTheShape) {
  std::vector<float> a(5);
  std::vector<tensor_to_write> ts = {{"a", dtype::f32, {2, 3}, bytes_of(a)}};
  auto err = write_safetensors(file_, ts);
  ASSERT_TRUE(err);
  EXPECT_CONTAINS(error_message(err), "tensor 'a' has 20 bytes");
  EXPECT_FALSE(fs::exists(file_));
}

TEST_F(SafetensorsTest, WriterReportsUnwritablePathAsIoError) {
  std::vector<float> a(1);
  std::vector<tensor_to_write> ts = {{"a", dtype::f32, {1}, bytes_of(a)}};
  auto path = dir_.path() / "no-such-dir" / "x.safetensors";
  auto err = write_safetensors(path, ts);
  ASSERT_TRUE(err);
  EXPECT_TRUE(err == engine_errc::io_error);
  EXPECT_CONTAINS(error_message(err), path.string());
}

TEST_F(SafetensorsTest, MissingFileIsIoError) {
  auto msg = open_error(dir_.path() / "absent.safetensors", engine_errc::io_error);
  EXPECT_CONTAINS(msg, "cannot open");
}

TEST_F(SafetensorsTest, RejectsEmptyFile) {
  std::ofstream{file_}.close();
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "file is 0 bytes, too short for the 8-byte header length");
}

TEST_F(SafetensorsTest, RejectsSevenByteFile) {
  std::ofstream{file_, std::ios::binary} << std::string(7, '\x01');
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "file is 7 bytes");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthPastEndOfFile) {
  write_raw(file_, "{}", 0, 1000);
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "header length 1000 runs past the end of the 10-byte file");
  write_raw(file_, "{}", 0, ~uint64_t{0});
  msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "runs past the end");
}

TEST_F(SafetensorsTest, RejectsHeaderLongerThanTheLimit) {
  write_raw(file_, "{}", 0, 150'000'000);
  fs::resize_file(file_, 160'000'000); // sparse: costs no disk
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "header length 150000000 exceeds the limit of 100000000 bytes");
}

TEST_F(SafetensorsTest, RejectsHeaderThatIsNotJson) {
  write_raw(file_, "{\"a\": {\"dtype\": ", 16);
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "header is not valid JSON");
}

TEST_F(SafetensorsTest, RejectsHeaderThatIsNotAnObject) {
  write_raw(file_, "[1, 2, 3]", 0);
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "header is not a JSON object but array");
}

TEST_F(SafetensorsTest, RejectsUnsupportedAndUnknownDtypesNamingTheTensor) {
  write_raw(file_, R"({"w": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}})", 4);
  auto msg = open_error(file_, engine_errc::unsupported);
  EXPECT_CONTAINS(msg, "tensor 'w' has dtype 'I8', not supported (supported: F32, F16, BF16)");
  write_raw(file_, R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  msg = open_error(file_, engine_errc::unsupported);
  EXPECT_CONTAINS(msg, "'F64'");
  write_raw(file_, R"({"w": {"dtype": "Q4_K", "shape": [1], "data_offsets": [0, 1]}})", 1);
  msg = open_error(file_, engine_errc::unsupported);
  EXPECT_CONTAINS(msg, "tensor 'w' has unknown dtype 'Q4_K'");
}

TEST_F(SafetensorsTest, RejectsShapeThatDisagreesWithByteCount) {
  write_raw(file_, R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24);
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "tensor 'w' has 20 bytes but its shape [2,3] and dtype F32 need 24");
}

TEST_F(SafetensorsTest, RejectsOffsetsPastEndOfData) {
  write_raw(file_, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})", 16);
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "tensor 'w' has data_offsets [8, 24] outside the 16-byte data section");
  write_raw(file_, R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [9, 8]}})", 16);
  msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "data_offsets [9, 8]");
}

TEST_F(SafetensorsTest, RejectsOverlappingTensors) {
  write_raw(file_,
            R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
            16);
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "tensor 'b' (bytes 8..16) overlaps tensor 'a' (bytes 0..16)");
}

TEST_F(SafetensorsTest, AcceptsEmptyTensorInsideAnotherTensorsRange) {
  write_raw(file_,
            R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}})",
            16);
  auto f = safetensors_file::open(file_);
  ASSERT_TRUE(f) << tessera::error_text(f.error());
  EXPECT_EQ(f->tensors().size(), 2u);
}

TEST_F(SafetensorsTest, RejectsNegativeDimension) {
  write_raw(file_, R"({"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}})", 16);
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "tensor 'w' has dimension -1 in its shape");
}

TEST_F(SafetensorsTest, RejectsHugeDimensionsWhoseProductOverflows) {
  write_raw(
    file_,
    R"({"w": {"dtype": "BF16", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})",
    0);
  auto msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "tensor 'w' has a shape whose size overflows");
  // The product fits in 64 bits but the byte count does not.
  write_raw(file_,
            R"({"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 0]}})",
            0);
  msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "overflows");
  write_raw(file_,
            R"({"w": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 0]}})",
            0);
  msg = open_error(file_, engine_errc::bad_weights);
  EXPECT_CONTAINS(msg, "too large");
}

TEST_F(SafetensorsTest, RejectsMalformedEntriesAndMetadata) {
  write_raw(file_, R"({"w": 5})", 0);
  EXPECT_CONTAINS(open_error(file_, engine_errc::bad_weights), "tensor 'w' is not a JSON object");
  write_raw(file_, R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", 16);
  EXPECT_CONTAINS(open_error(file_, engine_errc::bad_weights), "tensor 'w' has no shape list");
  write_raw(file_, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0]}})", 16);
  EXPECT_CONTAINS(open_error(file_, engine_errc::bad_weights), "no data_offsets pair");
  write_raw(file_, R"({"w": {"shape": [4], "data_offsets": [0, 16]}})", 16);
  EXPECT_CONTAINS(open_error(file_, engine_errc::bad_weights), "tensor 'w' has no dtype");
  write_raw(file_, R"({"__metadata__": {"format": 1}})", 0);
  EXPECT_CONTAINS(open_error(file_, engine_errc::bad_weights),
                  "__metadata__ value 'format' is not a string");
}

TEST_F(SafetensorsTest, ViewsStayValidAfterTheFileObjectMoves) {
  std::vector<float> a = {3, 1, 4};
  std::vector<tensor_to_write> ts = {{"a", dtype::f32, {3}, bytes_of(a)}};
  ASSERT_FALSE(write_safetensors(file_, ts));
  auto f = safetensors_file::open(file_);
  ASSERT_TRUE(f);
  const tensor_view* view = f->find("a");
  std::vector<safetensors_file> files;
  files.push_back(std::move(*f));
  EXPECT_EQ(files[0].find("a"), view);
  EXPECT_EQ(reinterpret_cast<const float*>(view->data)[2], 4.0f);
}

} // namespace
