// The CPU allocator hook against the global tracker. The hook is process-wide, so every test
// installs it (idempotent) and uses device indices no other test uses, measuring from the
// device's value at the start of the test.
#include "memory/cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <thread>

#include "tandem/memory/context.h"
#include "tandem/memory/tracker.h"

namespace tandem::memory {
namespace {

class CpuAccounting : public ::testing::Test {
 protected:
  void SetUp() override { install_cpu_accounting(); }
  Tracker& tracker() { return Tracker::global(); }
};

TEST_F(CpuAccounting, InstallIsIdempotent) {
  c10::Allocator* installed = c10::GetCPUAllocator();
  install_cpu_accounting();
  EXPECT_TRUE(cpu_accounting_installed());
  EXPECT_EQ(c10::GetCPUAllocator(), installed);
}

TEST_F(CpuAccounting, ChargesTheThreadsDeviceAndReleasesItFromAnyThread) {
  const uint64_t device_before = tracker().current(10);
  const uint64_t other_before = tracker().current(11);
  const uint64_t host_before = tracker().current(Tracker::kHost);
  torch::Tensor t;
  uint64_t inside = 0;
  std::thread worker([&] {
    ScopedWhere where(10, "cpu:10");
    t = torch::ones({1000}, torch::kFloat32);
    inside = tracker().current(10);
  });
  worker.join();
  EXPECT_EQ(inside, device_before + 4000);
  EXPECT_EQ(tracker().current(10), device_before + 4000);
  EXPECT_EQ(tracker().current(11), other_before);
  EXPECT_EQ(tracker().current(Tracker::kHost), host_before);

  // Freed on this thread (no device, and a different thread from the one that allocated).
  {
    ScopedWhere elsewhere(11, "cpu:11");
    t = torch::Tensor();
  }
  EXPECT_EQ(tracker().current(10), device_before);
  EXPECT_EQ(tracker().current(11), other_before);
  EXPECT_EQ(tracker().current(Tracker::kHost), host_before);
}

TEST_F(CpuAccounting, TracksThePeak) {
  ScopedWhere where(12, "cpu:12");
  const uint64_t base = tracker().current(12);
  tracker().reset_peak(12);
  EXPECT_EQ(tracker().peak(12), base);
  auto a = torch::empty({1024}, torch::kFloat32);  // 4096 bytes
  auto b = torch::empty({1024}, torch::kFloat64);  // 8192 bytes
  a = torch::Tensor();
  EXPECT_EQ(tracker().current(12), base + 8192);
  EXPECT_EQ(tracker().peak(12), base + 12288);
  b = torch::Tensor();
  EXPECT_EQ(tracker().current(12), base);
  EXPECT_EQ(tracker().peak(12), base + 12288);
  tracker().reset_peak(12);
  EXPECT_EQ(tracker().peak(12), base);
}

TEST_F(CpuAccounting, WithoutADeviceBytesGoToTheHostBucket) {
  ASSERT_EQ(current_where().device, -1);
  const uint64_t before = tracker().current(Tracker::kHost);
  auto t = torch::empty({256}, torch::kFloat64);
  EXPECT_EQ(tracker().current(Tracker::kHost), before + 2048);
  t = torch::Tensor();
  EXPECT_EQ(tracker().current(Tracker::kHost), before);
}

TEST_F(CpuAccounting, OpsChargeTheirOutputs) {
  ScopedWhere where(13, "cpu:13");
  const uint64_t base = tracker().current(13);
  auto a = torch::ones({64, 32});
  auto b = torch::ones({32, 16});
  auto c = torch::matmul(a, b);  // 64*16 floats
  EXPECT_EQ(tracker().current(13), base + (64 * 32 + 32 * 16 + 64 * 16) * 4);
  EXPECT_EQ(c.sum().item<float>(), 64.0f * 16 * 32);
}

TEST_F(CpuAccounting, DataStaysAlignedAndUsable) {
  for (int64_t n : {1, 3, 17, 1000, 100003}) {
    auto t = torch::arange(n, torch::kFloat64);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u) << n;
    EXPECT_EQ(t.sum().item<double>(), static_cast<double>(n) * static_cast<double>(n - 1) / 2);
  }
}

TEST_F(CpuAccounting, ZeroSizedTensorsChargeNothing) {
  ScopedWhere where(14, "cpu:14");
  const uint64_t base = tracker().current(14);
  auto t = torch::empty({0, 5});
  EXPECT_EQ(tracker().current(14), base);
  t.resize_({3, 5});
  EXPECT_EQ(tracker().current(14), base + 60);
  t = torch::Tensor();
  EXPECT_EQ(tracker().current(14), base);
}

TEST_F(CpuAccounting, RawAllocateIsChargedToo) {
  ScopedWhere where(15, "cpu:15");
  const uint64_t base = tracker().current(15);
  c10::Allocator* allocator = c10::GetCPUAllocator();
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  void* p = allocator->raw_allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tracker().current(15), base + 1000);
  allocator->raw_deallocate(p);
  EXPECT_EQ(tracker().current(15), base);
}

TEST_F(CpuAccounting, ResizeReleasesTheOldBufferFromItsDevice) {
  torch::Tensor t;
  {
    ScopedWhere where(16, "cpu:16");
    t = torch::empty({10});
  }
  const uint64_t on16 = tracker().current(16);
  {
    ScopedWhere where(17, "cpu:17");
    const uint64_t base17 = tracker().current(17);
    t.resize_({1000});  // new buffer charged here, old one released from device 16
    EXPECT_EQ(tracker().current(17), base17 + 4000);
    EXPECT_EQ(tracker().current(16), on16 - 40);
    t = torch::Tensor();
    EXPECT_EQ(tracker().current(17), base17);
  }
}

}  // namespace
}  // namespace tandem::memory
