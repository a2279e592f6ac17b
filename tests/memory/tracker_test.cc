// The Tracker on its own, with private instances so that exact byte counts are not disturbed
// by tensors other tests allocate through the global one.
#include "tandem/memory/tracker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "tandem/memory/out_of_memory.h"

namespace tandem::memory {
namespace {

TEST(Tracker, CountsCurrentAndPeakPerDevice) {
  auto t = std::make_unique<Tracker>();
  t->charge(0, 100);
  t->charge(0, 50);
  t->charge(1, 7);
  EXPECT_EQ(t->current(0), 150u);
  EXPECT_EQ(t->current(1), 7u);
  t->release(0, 100);
  EXPECT_EQ(t->current(0), 50u);
  EXPECT_EQ(t->peak(0), 150u);
  t->charge(0, 20);
  EXPECT_EQ(t->peak(0), 150u);
  t->reset_peak(0);
  EXPECT_EQ(t->peak(0), 70u);
  t->charge(0, 200);
  EXPECT_EQ(t->peak(0), 270u);
  EXPECT_EQ(t->peak(1), 7u);
  EXPECT_EQ(t->current(Tracker::kHost), 0u);
}

TEST(Tracker, BudgetRefusesWithoutCharging) {
  auto t = std::make_unique<Tracker>();
  t->register_device(2, "cpu:2");
  t->set_budget(2, 1000);
  t->charge(2, 600);
  t->charge(2, 400);  // exactly at the budget is allowed
  EXPECT_THROW(t->charge(2, 1), OutOfMemory);
  EXPECT_EQ(t->current(2), 1000u);
  EXPECT_EQ(t->peak(2), 1000u);
  t->release(2, 1000);
  t->set_budget(2, 0);  // no budget
  t->charge(2, 1ULL << 40);
  EXPECT_EQ(t->current(2), 1ULL << 40);
}

TEST(Tracker, OutOfMemoryCarriesTheNumbers) {
  auto t = std::make_unique<Tracker>();
  t->register_device(5, "cpu:5");
  t->set_budget(5, 64ULL << 20);
  t->charge(5, 63126118);
  try {
    t->charge(5, 8ULL << 20);
    FAIL() << "no OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.device_name(), "cpu:5");
    EXPECT_EQ(e.requested(), 8ULL << 20);
    EXPECT_EQ(e.in_use(), 63126118u);
    EXPECT_EQ(e.peak(), 63126118u);
    EXPECT_EQ(e.budget(), 64ULL << 20);
    EXPECT_STREQ(
        e.what(),
        "cpu:5 is out of its 64.0 MiB budget: an allocation outside any stage asked for "
        "8.0 MiB while 60.2 MiB are in use (peak 60.2 MiB). Ways out: more devices (for "
        "a volume also Config::spatial = N: every sample cut into N depth slabs, one per device, "
        "each holding about 1/N of every activation), Config::recompute, more "
        "micro-batches, a smaller volume or batch, or a larger Config::device_memory.");
  }
}

TEST(Tracker, NamesDevices) {
  auto t = std::make_unique<Tracker>();
  EXPECT_EQ(t->name(Tracker::kHost), "host");
  EXPECT_EQ(t->name(3), "device 3");
  t->register_device(3, "cuda:0");
  EXPECT_EQ(t->name(3), "cuda:0");
}

TEST(Tracker, RejectsDevicesOutOfRange) {
  auto t = std::make_unique<Tracker>();
  EXPECT_THROW(t->charge(Tracker::kMaxDevices, 1), Error);
  EXPECT_THROW(t->charge(-2, 1), Error);
  EXPECT_THROW(t->set_budget(-2, 1), Error);
  EXPECT_THROW(t->current(Tracker::kMaxDevices), Error);
  EXPECT_NO_THROW(t->current(Tracker::kMaxDevices - 1));
}

// Many threads race to charge one device: the budget must hold exactly, never overshoot.
TEST(Tracker, ConcurrentChargesNeverExceedTheBudget) {
  auto t = std::make_unique<Tracker>();
  constexpr uint64_t kChunk = 1024;
  constexpr uint64_t kFits = 100;
  t->set_budget(0, kFits * kChunk);
  std::atomic<uint64_t> granted{0};
  std::atomic<uint64_t> refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 1000; ++k) {
        try {
          t->charge(0, kChunk);
          granted.fetch_add(1);
        } catch (const OutOfMemory&) {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(granted.load(), kFits);
  EXPECT_EQ(refused.load(), 4000 - kFits);
  EXPECT_EQ(t->current(0), kFits * kChunk);
  EXPECT_EQ(t->peak(0), kFits * kChunk);
}

// Charges and releases from several threads balance to zero, and the peak is a true maximum.
TEST(Tracker, ConcurrentChargeAndReleaseBalance) {
  auto t = std::make_unique<Tracker>();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&t, i] {
      for (int k = 0; k < 10000; ++k) {
        t->charge(1, static_cast<uint64_t>(i + 1));
        t->release(1, static_cast<uint64_t>(i + 1));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t->current(1), 0u);
  EXPECT_GE(t->peak(1), 4u);
  EXPECT_LE(t->peak(1), 10u);
}

}  // namespace
}  // namespace tandem::memory
