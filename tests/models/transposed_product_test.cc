// A transposed convolution whose kernel equals its stride, as one matrix product
// (models/transposed_product.h): the same output and gradients as LibTorch's transposed
// convolution, in fp32, for 1 to 3 spatial axes, kernels of 2 and 3, with and without a bias; and
// taken only under autocast to a reduced type on CPU devices, for such kernels.
#include "tandem/models/transposed_product.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "tandem/graph/precision.h"

namespace tandem {
namespace {

torch::Tensor reference(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                        std::vector<int64_t> stride) {
  switch (x.dim()) {
    case 3:
      return torch::conv_transpose1d(x, w, b, stride);
    case 4:
      return torch::conv_transpose2d(x, w, b, stride);
    default:
      return torch::conv_transpose3d(x, w, b, stride);
  }
}

// forward(x, w, b) of copies of x0, w0 and b0 (no bias unless `with_bias`): its output, then the
// gradients of x, w and b from a fixed random seed on the output.
using Forward =
    std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;
std::vector<torch::Tensor> output_and_grads(const Forward& forward, const torch::Tensor& x0,
                                            const torch::Tensor& w0, const torch::Tensor& b0,
                                            bool with_bias) {
  torch::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                b = with_bias ? b0.clone().requires_grad_(true) : torch::Tensor();
  torch::Tensor y = forward(x, w, b);
  torch::manual_seed(1);
  y.backward(torch::randn(y.sizes()));
  std::vector<torch::Tensor> out{y.detach(), x.grad(), w.grad()};
  if (with_bias) out.push_back(b.grad());
  return out;
}

// Both lists the same shapes and values to 1e-5; `what` names the case.
void expect_close(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].sizes(), want[i].sizes()) << what << " tensor " << i;
    EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-5, 1e-5)) << what << " tensor " << i;
  }
}

TEST(TransposedProduct, IsTheTransposedConvolutionWhereTheKernelIsItsStride) {
  torch::manual_seed(0);
  for (int dims = 1; dims <= 3; ++dims) {
    for (int64_t k : {2, 3}) {
      for (bool with_bias : {true, false}) {
        std::vector<int64_t> xs{2, 3}, ws{3, 5}, stride;
        for (int i = 0; i < dims; ++i) {
          xs.push_back(3 + i);
          ws.push_back(k);
          stride.push_back(k);
        }
        const torch::Tensor x0 = torch::randn(xs), w0 = torch::randn(ws), b0 = torch::randn({5});
        const Forward product = models::transposed_conv_as_product;
        expect_close(
            output_and_grads(product, x0, w0, b0, with_bias),
            output_and_grads([&](const torch::Tensor& x, const torch::Tensor& w,
                                 const torch::Tensor& b) { return reference(x, w, b, stride); },
                             x0, w0, b0, with_bias),
            fmt::format("{}D k={} bias {}", dims, k, with_bias));
      }
    }
  }
}

TEST(TransposedProduct, TakenUnderAReducedCpuAutocastForAKernelAsLargeAsItsStride) {
  const torch::Tensor x = torch::randn({1, 2, 4, 4, 4}), w = torch::randn({2, 3, 2, 2, 2});
  EXPECT_FALSE(models::transposed_conv_as_product_here(x, w, {2, 2, 2})) << "no autocast";
  EXPECT_FALSE(models::transposed_conv_as_product_here(x.to(torch::kBFloat16), w, {2, 2, 2}))
      << "a bf16 tensor without autocast";
  graph::ScopedAutocast autocast(c10::kCPU, c10::kBFloat16);
  EXPECT_TRUE(models::transposed_conv_as_product_here(x, w, {2, 2, 2}));
  EXPECT_TRUE(models::transposed_conv_as_product_here(x.to(torch::kBFloat16), w, {2, 2, 2}))
      << "a bf16 tensor under autocast: the output of a bf16 layer";
  EXPECT_FALSE(models::transposed_conv_as_product_here(x, w, {1, 2, 2})) << "overlapping blocks";
  EXPECT_FALSE(
      models::transposed_conv_as_product_here(x, torch::randn({2, 3, 3, 3, 3}), {2, 2, 2}));
}

// A one-voxel kernel as a product per sample: LibTorch's convolution's output and gradients
// in fp32, for 1 to 3 spatial axes, with and without a bias; under bf16 autocast its output
// is bf16, within bf16's rounding of fp32's; taken only there, and only for one-voxel kernels.
TEST(PointwiseProduct, IsTheConvolutionOfAOneVoxelKernel) {
  torch::manual_seed(2);
  for (int dims = 1; dims <= 3; ++dims) {
    for (bool with_bias : {true, false}) {
      std::vector<int64_t> xs{2, 4}, ws{3, 4};
      for (int i = 0; i < dims; ++i) {
        xs.push_back(3 + i);
        ws.push_back(1);
      }
      const torch::Tensor x0 = torch::randn(xs), w0 = torch::randn(ws), b0 = torch::randn({3});
      const Forward product = models::pointwise_conv_as_product;
      const Forward conv = [dims](const torch::Tensor& x, const torch::Tensor& w,
                                  const torch::Tensor& b) {
        return dims == 1   ? torch::conv1d(x, w, b)
               : dims == 2 ? torch::conv2d(x, w, b)
                           : torch::conv3d(x, w, b);
      };
      expect_close(output_and_grads(product, x0, w0, b0, with_bias),
                   output_and_grads(conv, x0, w0, b0, with_bias),
                   fmt::format("{}D bias {}", dims, with_bias));
    }
  }
  const torch::Tensor x = torch::randn({2, 8, 4, 4, 4}), w = torch::randn({1, 8, 1, 1, 1});
  const torch::Tensor b = torch::randn({1});
  EXPECT_FALSE(models::pointwise_conv_as_product_here(x, w)) << "no autocast";
  graph::ScopedAutocast autocast(c10::kCPU, c10::kBFloat16);
  EXPECT_TRUE(models::pointwise_conv_as_product_here(x.to(torch::kBFloat16), w));
  EXPECT_FALSE(models::pointwise_conv_as_product_here(x, torch::randn({1, 8, 3, 3, 3})));
  EXPECT_FALSE(models::pointwise_conv_as_product_here(x, torch::randn({1, 4, 1, 1, 1})));
  const torch::Tensor y = models::pointwise_conv_as_product(x.to(torch::kBFloat16), w, b);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  const torch::Tensor exact = torch::conv3d(x.to(torch::kBFloat16).to(torch::kFloat32), w, b);
  EXPECT_LE((y.to(torch::kFloat32) - exact).abs().max().item<double>(),
            exact.abs().max().item<double>() / 64);
}

}  // namespace
}  // namespace tandem
