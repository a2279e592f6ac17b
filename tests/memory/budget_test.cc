// Budgets enforced by the CPU allocator hook: OutOfMemory is thrown before allocating, names
// where it happened, reaches the caller through LibTorch ops and autograd, and leaks nothing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <thread>

#include "memory/cpu_allocator.h"
#include "tandem/memory/context.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/memory/tracker.h"

namespace tandem::memory {
namespace {

constexpr uint64_t kKiB = 1024;

class Budget : public ::testing::Test {
 protected:
  void SetUp() override { install_cpu_accounting(); }
  void TearDown() override { Tracker::global().set_budget(device_, 0); }
  Tracker& tracker() { return Tracker::global(); }
  // Each test uses its own device so exact counts are not disturbed by other tests.
  void use_device(int device) { device_ = device; }
  int device_ = 0;
};

TEST_F(Budget, ThrowsBeforeAllocatingAndNamesEverything) {
  use_device(20);
  tracker().set_budget(20, 1024 * kKiB);
  ScopedWhere device(20, "cpu:20");
  ScopedWhere action(1, "forward", 2);
  ScopedWhere layer("conv3");
  ASSERT_EQ(tracker().current(20), 0u);

  auto kept = torch::empty({192 * 1024}, torch::kFloat32);  // 768 KiB
  try {
    auto too_much = torch::empty({128 * 1024}, torch::kFloat32);  // 512 KiB
    FAIL() << "allocation over budget succeeded";
  } catch (const OutOfMemory& e) {
    EXPECT_STREQ(
        e.what(),
        "cpu:20 is out of its 1.0 MiB budget: stage 1, layer conv3 (forward, "
        "micro-batch 2) asked for 512.0 KiB while 768.0 KiB are in use (peak 768.0 "
        "KiB). Ways out: more devices (for a volume also Config::spatial = N: every sample cut "
        "into N depth slabs, one per device, each holding about 1/N of every "
        "activation), Config::recompute, more micro-batches, a smaller volume or batch, "
        "or a larger Config::device_memory.");
    EXPECT_EQ(e.where().stage, 1);
    EXPECT_EQ(e.where().microbatch, 2);
    EXPECT_EQ(e.where().layer, "conv3");
    EXPECT_EQ(e.where().phase, "forward");
    EXPECT_EQ(e.requested(), 512 * kKiB);
  }
  EXPECT_EQ(tracker().current(20), 768 * kKiB);
  EXPECT_EQ(tracker().peak(20), 768 * kKiB);
  kept = torch::Tensor();
  EXPECT_EQ(tracker().current(20), 0u);
}

TEST_F(Budget, IsATandemError) {
  use_device(21);
  tracker().set_budget(21, 100);
  ScopedWhere device(21, "cpu:21");
  EXPECT_THROW(torch::empty({1000}), Error);
  EXPECT_EQ(tracker().current(21), 0u);
}

TEST_F(Budget, PropagatesThroughAnOp) {
  use_device(22);
  ScopedWhere device(22, "cpu:22");
  ScopedWhere action(0, "forward", 0);
  ScopedWhere layer("fc1");
  auto a = torch::ones({256, 256});
  auto b = torch::ones({256, 256});
  const uint64_t inputs = tracker().current(22);
  EXPECT_EQ(inputs, 2u * 256 * 256 * 4);
  tracker().set_budget(22, inputs + 1000);  // the 256 KiB output does not fit
  EXPECT_THROW(torch::matmul(a, b), OutOfMemory);
  EXPECT_THROW(torch::cat({a, b}), OutOfMemory);
  EXPECT_THROW(a.add(b), OutOfMemory);
  EXPECT_EQ(tracker().current(22), inputs);
  a = torch::Tensor();
  b = torch::Tensor();
  EXPECT_EQ(tracker().current(22), 0u);
}

TEST_F(Budget, PropagatesThroughAutogradBackward) {
  use_device(23);
  std::string message;
  uint64_t after_failure = 1;
  std::thread worker([&] {
    ScopedWhere device(23, "cpu:23");
    {
      auto w = torch::ones({512, 512}, torch::requires_grad());
      auto x = torch::ones({4, 512});
      torch::Tensor loss;
      {
        ScopedWhere action(3, "forward", 1);
        ScopedWhere layer("dense");
        loss = torch::matmul(x, w).sum();
      }
      // The weight gradient (1 MiB) cannot fit next to what is held now.
      tracker().set_budget(23, tracker().current(23) + 64 * kKiB);
      ScopedWhere action(3, "backward", 1);
      ScopedWhere layer("dense");
      try {
        loss.backward();
      } catch (const OutOfMemory& e) {
        message = e.what();
      }
      EXPECT_FALSE(w.grad().defined());
    }
    after_failure = tracker().current(23);
  });
  worker.join();
  EXPECT_NE(message.find("cpu:23 is out of its"), std::string::npos) << message;
  EXPECT_NE(message.find("stage 3, layer dense (backward, micro-batch 1) asked for"),
            std::string::npos)
      << message;
  EXPECT_EQ(after_failure, 0u);
}

TEST_F(Budget, RaisingTheBudgetLetsTheSameAllocationThrough) {
  use_device(24);
  ScopedWhere device(24, "cpu:24");
  tracker().set_budget(24, 4000);
  EXPECT_THROW(torch::empty({1001}), OutOfMemory);
  auto fits = torch::empty({1000});
  EXPECT_EQ(tracker().current(24), 4000u);
  tracker().set_budget(24, 8000);
  auto also = torch::empty({1000});
  EXPECT_EQ(tracker().current(24), 8000u);
}

}  // namespace
}  // namespace tandem::memory
