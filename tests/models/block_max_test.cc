// Max pooling by tiling blocks in the input's own type (models/block_max.h): in bf16, LibTorch's
// max_pool3d of an fp32 copy, output and gradient bit for bit, also where values tie (the
// gradient to the first maximum of a block) and where a side is not a whole number of blocks;
// the ONNX MaxPool and the U-Net's pooling keep bf16 under a bf16 autocast.
#include "tandem/models/block_max.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "tandem/graph/precision.h"

namespace tandem {
namespace {

// max_pool3d of the fp32 copy of x (bf16), then its gradient from `g`: both in bf16.
std::vector<torch::Tensor> reference(const torch::Tensor& x, const torch::Tensor& g,
                                     std::vector<int64_t> kernel) {
  torch::Tensor x32 = x.to(torch::kFloat).requires_grad_(true);
  torch::Tensor y = torch::max_pool3d(x32, kernel, kernel);
  y.backward(g.to(torch::kFloat));
  return {y.detach().to(torch::kBFloat16), x32.grad().to(torch::kBFloat16)};
}

std::vector<torch::Tensor> blocks(const torch::Tensor& x0, const torch::Tensor& g,
                                  std::vector<int64_t> kernel) {
  torch::Tensor x = x0.clone().requires_grad_(true);
  torch::Tensor y = models::block_max_pool(x, kernel);
  y.backward(g);
  return {y.detach(), x.grad()};
}

TEST(BlockMax, IsMaxPool3dOfAnFp32CopyBitForBit) {
  torch::manual_seed(3);
  struct Case {
    std::vector<int64_t> shape, kernel;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 4, 6, 8}, {2, 2, 2}},
                                         {{1, 2, 5, 7, 4}, {2, 2, 2}},  // partial blocks left out
                                         {{2, 1, 6, 4, 6}, {3, 1, 2}}}) {
    // Small integers: many blocks hold their maximum more than once.
    for (bool ties : {false, true}) {
      const torch::Tensor x = ties ? torch::randint(-2, 3, c.shape).to(torch::kBFloat16)
                                   : torch::randn(c.shape).to(torch::kBFloat16);
      std::vector<int64_t> out{c.shape[0], c.shape[1]};
      for (size_t i = 0; i < 3; ++i) out.push_back(c.shape[i + 2] / c.kernel[i]);
      const torch::Tensor g = torch::randn(out).to(torch::kBFloat16);
      const auto got = blocks(x, g, c.kernel);
      const auto want = reference(x, g, c.kernel);
      const std::string what = fmt::format("shape [{}] kernel [{}] ties {}",
                                           fmt::join(c.shape, ","), fmt::join(c.kernel, ","), ties);
      EXPECT_EQ(got[0].scalar_type(), torch::kBFloat16) << what;
      EXPECT_TRUE(torch::equal(got[0], want[0])) << what;
      EXPECT_TRUE(torch::equal(got[1], want[1])) << what;
      // Each block's gradient goes to one element: as many nonzero entries as the output's.
      if (ties) {
        EXPECT_EQ(got[1].ne(0).sum().item<int64_t>(), g.ne(0).sum().item<int64_t>()) << what;
      }
    }
  }
}

TEST(BlockMax, TakenForAReducedTypeOnCpuWithThreeSpatialAxes) {
  const torch::Tensor x = torch::randn({1, 2, 4, 4, 4});
  EXPECT_FALSE(models::block_max_pool_here(x, {2, 2, 2})) << "fp32 has LibTorch's kernel";
  EXPECT_TRUE(models::block_max_pool_here(x.to(torch::kBFloat16), {2, 2, 2}));
  EXPECT_FALSE(models::block_max_pool_here(x.to(torch::kBFloat16)[0], {2, 2}))
      << "max_pool2d has a bf16 kernel";
}

// Under a bf16 autocast, LibTorch's max_pool3d gives fp32 (it runs on an fp32 copy of its input,
// which its backward keeps); the block pooling keeps the input's type.
TEST(BlockMax, KeepsBf16WhereAutocastsMaxPool3dGivesFp32) {
  graph::ScopedAutocast autocast(c10::kCPU, c10::kBFloat16);
  const torch::Tensor x = torch::randn({1, 2, 4, 4, 4}).to(torch::kBFloat16);
  EXPECT_EQ(torch::max_pool3d(x, 2).scalar_type(), torch::kFloat);
  EXPECT_EQ(models::block_max_pool(x, {2, 2, 2}).scalar_type(), torch::kBFloat16);
}

}  // namespace
}  // namespace tandem
