#include "memory/cuda_stats.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "tandem/common/check.h"

namespace tandem::memory {
namespace {

TEST(CudaStats, WithoutCudaEveryCallExplainsWhy) {
  if (cuda_stats_available()) GTEST_SKIP() << "CUDA is available";
  try {
    cuda_device_stats(0);
    FAIL() << "no error without CUDA";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs CUDA"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda_reset_peak(0), Error);
  EXPECT_THROW(cuda_set_memory_fraction(0.5, 0), Error);
}

TEST(CudaStats, CountsTensorBytesAndPeak) {
  if (!cuda_stats_available()) GTEST_SKIP() << "no CUDA device";
  const DeviceStats before = cuda_device_stats(0);
  auto t = torch::empty({1 << 20}, torch::TensorOptions().device(torch::kCUDA, 0));  // 4 MiB
  const DeviceStats during = cuda_device_stats(0);
  EXPECT_EQ(during.current, before.current + (4u << 20));
  EXPECT_GE(during.peak, during.current);
  EXPECT_GE(during.reserved, during.current);
  t = torch::Tensor();
  EXPECT_EQ(cuda_device_stats(0).current, before.current);
  cuda_reset_peak(0);
  EXPECT_EQ(cuda_device_stats(0).peak, before.current);
}

TEST(CudaStats, MemoryFractionCapsAllocations) {
  if (!cuda_stats_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_THROW(cuda_set_memory_fraction(0.0, 0), Error);
  EXPECT_THROW(cuda_set_memory_fraction(1.5, 0), Error);
  EXPECT_THROW(cuda_device_stats(1000), Error);
  cuda_set_memory_fraction(0.01, 0);
  const auto options = torch::TensorOptions().device(torch::kCUDA, 0).dtype(torch::kUInt8);
  EXPECT_ANY_THROW(torch::empty({int64_t{64} << 30}, options));  // 64 GiB, far over 1%
  cuda_set_memory_fraction(1.0, 0);
}

}  // namespace
}  // namespace tandem::memory
