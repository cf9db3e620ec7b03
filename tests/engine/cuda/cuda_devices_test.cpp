// Runs everywhere (label unit): without a driver or device the CUDA backend
// must report a clear error, not crash; with one it must describe it.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/cuda/cuda_buffer.hpp"
#include "engine/cuda/cuda_device.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::engine::cuda {
namespace {

TEST(CudaDevicesTest, ListsDevicesOrGivesAClearError) {
  auto devices = cuda_devices();
  if (!devices) {
    const std::string text = error_text(devices.error());
    std::printf("cuda_devices(): %s\n", text.c_str());
    EXPECT_TRUE(devices.error() == engine_errc::unsupported) << text;
    EXPECT_FALSE(error_message(devices.error()).empty());
    EXPECT_NE(text.find("cudaGetDeviceCount"), std::string::npos) << text;
    return;
  }
  ASSERT_FALSE(devices->empty());
  for (size_t i = 0; i < devices->size(); ++i) {
    const auto& d = (*devices)[i];
    std::printf("device %d: %s, sm_%d%d, %d SMs, %zu bytes\n", d.index, d.name.c_str(),
                d.sm_major, d.sm_minor, d.multiprocessors, d.total_memory_bytes);
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_memory_bytes, 0u);
    EXPECT_GT(d.sm_major, 0);
    EXPECT_GT(d.multiprocessors, 0);
  }
}

TEST(DeviceBufferTest, EmptyAllocationNeedsNoDevice) {
  auto buf = device_buffer::allocate(0);
  ASSERT_TRUE(buf) << error_text(buf.error());
  EXPECT_EQ(buf->data(), nullptr);
  EXPECT_EQ(buf->size_bytes(), 0u);
  EXPECT_FALSE(buf->copy_from_host(nullptr, 0));
}

TEST(DeviceBufferTest, RoundTripsBytesOrFailsWithTheCudaCall) {
  auto buf = device_buffer::allocate(1000);
  if (!buf) {
    const std::string text = error_text(buf.error());
    EXPECT_TRUE(buf.error() == engine_errc::unsupported ||
                buf.error() == engine_errc::device_error)
      << text;
    EXPECT_NE(text.find("cudaMalloc"), std::string::npos) << text;
    return;
  }
  std::vector<unsigned char> in(1000), out(1000, 0);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<unsigned char>(i * 7 + 1);
  ASSERT_FALSE(buf->copy_from_host(in.data(), in.size()));
  ASSERT_FALSE(buf->copy_to_host(out.data(), 500, 500));
  EXPECT_EQ(std::memcmp(out.data(), in.data() + 500, 500), 0);

  device_buffer moved = std::move(*buf);
  EXPECT_EQ(buf->data(), nullptr);
  EXPECT_EQ(moved.size_bytes(), 1000u);
  ASSERT_FALSE(moved.copy_to_host(out.data(), 1000));
  EXPECT_EQ(out, in);
}

} // namespace
} // namespace tessera::engine::cuda
