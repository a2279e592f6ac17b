// The moments data sets are standardized with: the textbook values, and the same bits
// whatever thread count the calling thread has.
#include "data/moments.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

namespace tandem::data {
namespace {

TEST(Moments, AreTheMeanAndTheSampleDeviation) {
  const Moments m = moments(torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kFloat64));
  EXPECT_EQ(m.mean, 2.5);
  EXPECT_DOUBLE_EQ(m.stddev, std::sqrt(5.0 / 3.0));
}

TEST(Moments, OfBytesAreThoseOfTheirValues) {
  const Moments m = moments(torch::tensor({0, 255, 255, 0}, torch::kUInt8));
  EXPECT_EQ(m.mean, 127.5);
  EXPECT_DOUBLE_EQ(m.stddev, std::sqrt(4 * 127.5 * 127.5 / 3));
}

// A data set kept as bytes: the moments of the bytes' values, bit for bit those of the values
// themselves (MNIST's pixels / 255, kept as bytes, standardized by them).
TEST(Moments, ThroughATableOfByteValuesAreThoseOfTheValues) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(5);
  const torch::Tensor bytes = torch::randint(0, 256, {3, 1, 28, 28}, gen, torch::kUInt8);
  const torch::Tensor value_of = torch::arange(256, torch::kUInt8).to(torch::kFloat32).div_(255);
  const Moments through = moments_of_bytes(bytes, value_of);
  const Moments direct = moments(bytes.to(torch::kFloat32).div_(255));
  EXPECT_EQ(through.mean, direct.mean);
  EXPECT_EQ(through.stddev, direct.stddev);
  EXPECT_GT(through.stddev, 0.2);
  EXPECT_THROW(moments_of_bytes(bytes.to(torch::kInt32), value_of), std::exception);
  EXPECT_THROW(moments_of_bytes(bytes, value_of.slice(0, 0, 255)), std::exception);
}

TEST(Moments, OfOneValueHaveNoDeviation) {
  const Moments one = moments(torch::tensor({7.0f}));
  EXPECT_EQ(one.mean, 7.0);
  EXPECT_EQ(one.stddev, 0.0);
  const Moments none = moments(torch::empty({0}));
  EXPECT_EQ(none.mean, 0.0);
  EXPECT_EQ(none.stddev, 0.0);
}

TEST(Moments, OfAStridedViewAreThoseOfItsElements) {
  torch::Tensor x = torch::arange(12, torch::kFloat32).reshape({3, 4});
  const Moments column = moments(x.select(1, 1));  // 1, 5, 9
  EXPECT_EQ(column.mean, 5.0);
  EXPECT_EQ(column.stddev, 4.0);
}

// Large enough that LibTorch's own sum splits among threads; the moments do not.
TEST(Moments, DoNotDependOnTheThreadCount) {
  const int before = at::get_num_threads();
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(11);
  const torch::Tensor x = torch::rand({1 << 20}, gen, torch::kFloat32);
  at::set_num_threads(1);
  const Moments one = moments(x);
  at::set_num_threads(4);
  const Moments four = moments(x);
  at::set_num_threads(before);
  EXPECT_EQ(one.mean, four.mean);
  EXPECT_EQ(one.stddev, four.stddev);
  EXPECT_NEAR(one.mean, 0.5, 1e-3);
  EXPECT_NEAR(one.stddev, std::sqrt(1.0 / 12), 1e-3);
}

}  // namespace
}  // namespace tandem::data
