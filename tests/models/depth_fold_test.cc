// A single-sample convolution folded into two depth slabs (DepthFold) gives the convolution of
// the whole sample and its three gradients. The reference runs in double on the same values;
// the tolerance, 2e-6 of the largest magnitude, covers the fp32 rounding of sums of up to a few
// thousand terms (the weight gradient sums over every voxel, in another order than an unfolded
// convolution); measured here: at most 4.7e-7. A slab that missed or doubled one row of the
// overlap moves a gradient by far more (the deliberate break of add_slabs failed every case).
#include "tandem/models/depth_fold.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/models/split_conv.h"

namespace tandem {
namespace {

using models::DepthFold;

double largest_error(const torch::Tensor& got, const torch::Tensor& want) {
  const double scale = want.abs().max().item<double>();
  return (got.to(torch::kFloat64) - want).abs().max().item<double>() / scale;
}

TEST(DepthFold, TakesSmallSingleSamplesOnTheCpuOnly) {
  if (!at::hasMKLDNN()) GTEST_SKIP() << "this LibTorch has no oneDNN: nothing to fold for";
  const torch::Tensor w = torch::randn({4, 4, 3, 3, 3});
  EXPECT_TRUE(DepthFold::of(torch::randn({1, 4, 8, 8, 8}), w, 1));
  EXPECT_FALSE(DepthFold::of(torch::randn({2, 4, 8, 8, 8}), w, 1)) << "a batch of 2";
  EXPECT_FALSE(
      DepthFold::of(torch::randn({1, 4, 8, 8, 8}, torch::kFloat64), w.to(torch::kFloat64), 1))
      << "double";
  // C*D*H = 4*80*80 = 25600 > 20480: LibTorch takes oneDNN for it already.
  EXPECT_FALSE(DepthFold::of(torch::randn({1, 4, 80, 80, 2}), w, 1)) << "above the threshold";
  // C*D*H = 4*80*64 = 20480: not above it.
  EXPECT_TRUE(DepthFold::of(torch::randn({1, 4, 80, 64, 2}), w, 1)) << "at the threshold";
  EXPECT_FALSE(DepthFold::of(torch::randn({1, 4, 3, 8, 8}), w, 0)) << "one output row";
  EXPECT_TRUE(DepthFold::of(torch::randn({1, 4, 2, 8, 8}), w, 1)) << "two output rows";
  EXPECT_FALSE(DepthFold::of(torch::randn({1, 4, 8, 8, 8}), torch::randn({1, 4, 1, 1, 1}), 0))
      << "a 1x1x1 kernel";
}

struct Case {
  int64_t channels, depth, height, width, kernel, padding;
  bool bias;
};

TEST(DepthFold, OutputAndGradientsEqualTheWholeConvolution) {
  if (!at::hasMKLDNN()) GTEST_SKIP() << "this LibTorch has no oneDNN: nothing to fold for";
  torch::manual_seed(3);
  const std::vector<Case> cases = {
      {3, 8, 6, 5, 3, 1, true},   // even depth
      {3, 7, 6, 6, 3, 1, true},   // odd depth: the second half has a row to drop
      {2, 9, 5, 5, 3, 0, false},  // no padding: Do = D - 2
      {2, 6, 6, 6, 5, 2, true},   // kernel 5
      {2, 2, 4, 4, 3, 1, true},   // the fewest rows that fold
      {2, 5, 4, 4, 3, 2, true},   // padding above k/2: Do = D + 2
  };
  for (const Case& c : cases) {
    const std::string name = fmt::format("C={} D={} H={} W={} k={} padding={} bias={}", c.channels,
                                         c.depth, c.height, c.width, c.kernel, c.padding, c.bias);
    torch::Tensor x = torch::randn({1, c.channels, c.depth, c.height, c.width});
    torch::Tensor w = torch::randn({c.channels + 1, c.channels, c.kernel, c.kernel, c.kernel});
    torch::Tensor b = c.bias ? torch::randn({c.channels + 1}) : torch::Tensor();
    ASSERT_TRUE(DepthFold::of(x, w, c.padding)) << name;

    torch::Tensor xf = x.clone().requires_grad_(true), wf = w.clone().requires_grad_(true);
    torch::Tensor bf = c.bias ? b.clone().requires_grad_(true) : torch::Tensor();
    torch::Tensor y = models::split_conv3d(xf, wf, bf, c.padding);

    auto dbl = [](const torch::Tensor& t) {
      return t.defined() ? t.to(torch::kFloat64).requires_grad_(true) : torch::Tensor();
    };
    torch::Tensor xd = dbl(x), wd = dbl(w), bd = dbl(b);
    torch::Tensor yd = torch::conv3d(xd, wd, bd, 1, c.padding);
    ASSERT_EQ(y.sizes(), yd.sizes()) << name;
    const torch::Tensor r = torch::randn(y.sizes(), torch::kFloat64);
    (y * r.to(torch::kFloat32)).sum().backward();
    (yd * r).sum().backward();

    EXPECT_LE(largest_error(y.detach(), yd.detach()), 2e-6) << name << ": output";
    EXPECT_LE(largest_error(xf.grad(), xd.grad()), 2e-6) << name << ": input gradient";
    EXPECT_LE(largest_error(wf.grad(), wd.grad()), 2e-6) << name << ": weight gradient";
    if (c.bias) {
      EXPECT_LE(largest_error(bf.grad(), bd.grad()), 2e-6) << name << ": bias gradient";
    }
  }
}

}  // namespace
}  // namespace tandem
