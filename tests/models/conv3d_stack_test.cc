// The Conv3D stack's layers, shapes, FLOPs, errors and its MSE loss and metric.
#include "tandem/models/conv3d_stack.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/common/check.h"
#include "volume_models.h"

namespace tandem {
namespace {

using namespace model_testing;

TEST(Conv3dStack, OneLayerPerConvolution) {
  models::Conv3dStackOptions o;
  o.convs = 4;
  o.filters = 3;
  o.in_channels = 2;
  graph::Model m = models::conv3d_stack(o);
  ASSERT_EQ(m.layers.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(m.layers[i].name, fmt::format("conv{}", i));
  EXPECT_EQ(m.layers[0].inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(m.layers[3].outputs, std::vector<std::string>{"output"});
  EXPECT_EQ(m.metric_name, "mse");
  // 2->3, 3->3, 3->3, 3->1, each 3x3x3 with a bias.
  EXPECT_EQ(m.parameter_count(), (2 * 3 + 3 * 3 + 3 * 3 + 3 * 1) * 27 + 3 + 3 + 3 + 1);
  torch::NoGradGuard no_grad;
  torch::Tensor y = reference_forward(m, torch::randn({2, 2, 5, 6, 7}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 1, 5, 6, 7}));
}

TEST(Conv3dStack, ReluOnAllButTheLastConvolution) {
  graph::Model m = small_conv_stack();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 1, 8, 8, 8});
  EXPECT_GE(m.layers[0].forward({x})[0].min().item<double>(), 0.0);
  // The last convolution has no relu: random weights and inputs give negative values.
  torch::Tensor h = torch::randn({2, 4, 8, 8, 8});
  EXPECT_LT(m.layers[3].forward({h})[0].min().item<double>(), 0.0);
}

TEST(Conv3dStack, SingleConvolution) {
  models::Conv3dStackOptions o;
  o.convs = 1;
  o.filters = 7;
  graph::Model m = models::conv3d_stack(o);
  ASSERT_EQ(m.layers.size(), 1u);
  EXPECT_EQ(m.parameter_count(), 27 + 1);
}

TEST(Conv3dStack, FlopsWhenTheVolumeIsKnown) {
  graph::Model m = small_conv_stack();  // 4 convs, 4 filters, 8^3
  EXPECT_DOUBLE_EQ(m.layers[0].forward_flops_per_sample, 2.0 * 1 * 4 * 27 * 512);
  EXPECT_DOUBLE_EQ(m.layers[1].forward_flops_per_sample, 2.0 * 4 * 4 * 27 * 512);
  EXPECT_DOUBLE_EQ(m.layers[3].forward_flops_per_sample, 2.0 * 4 * 1 * 27 * 512);
  models::Conv3dStackOptions o;
  EXPECT_EQ(models::conv3d_stack(o).layers[0].forward_flops_per_sample, 0.0);
  o.volume = 128;  // the researcher's model: 10 x 256 filters on 128^3
  graph::Model big = models::conv3d_stack(o);
  EXPECT_DOUBLE_EQ(big.layers[5].forward_flops_per_sample, 2.0 * 256 * 256 * 27 * 128 * 128 * 128);
}

TEST(Conv3dStack, BadOptionsAreUserErrors) {
  models::Conv3dStackOptions o;
  o.convs = 0;
  EXPECT_THROW(models::conv3d_stack(o), Error);
  o = {};
  o.filters = 0;
  EXPECT_THROW(models::conv3d_stack(o), Error);
  o = {};
  o.in_channels = 0;
  EXPECT_THROW(models::conv3d_stack(o), Error);
  o = {};
  o.volume = -1;
  EXPECT_THROW(models::conv3d_stack(o), Error);
}

TEST(Conv3dStack, MseLossAndPerSampleMetric) {
  torch::Tensor out = torch::zeros({2, 1, 2, 2, 2});
  torch::Tensor target = torch::zeros({2, 1, 2, 2, 2});
  target[0].fill_(1);           // per-sample MSE 1
  target[1].view({-1})[0] = 2;  // per-sample MSE 4/8
  EXPECT_NEAR(models::mse_loss(out, target).item<double>(), (8 * 1 + 4) / 16.0, 1e-7);
  EXPECT_NEAR(models::mse_per_sample_sum(out, target), 1.0 + 0.5, 1e-7);
  EXPECT_THROW(models::mse_loss(out, target.flatten(2)), Error);
}

}  // namespace
}  // namespace tandem
