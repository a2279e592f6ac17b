// The 3D U-Net's layers, shapes and errors, and its Dice loss and metric.
#include "tandem/models/unet3d.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "error_of.h"
#include "tandem/common/check.h"
#include "tandem/graph/precision.h"
#include "tandem/spatial/forward_chunks.h"
#include "volume_models.h"

namespace tandem {
namespace {

using namespace model_testing;

std::vector<std::string> layer_names(const graph::Model& m) {
  std::vector<std::string> out;
  for (const auto& l : m.layers) out.push_back(l.name);
  return out;
}

const graph::Layer& layer(const graph::Model& m, const std::string& name) {
  const int i = m.find_layer(name);
  EXPECT_GE(i, 0) << name;
  return m.layers.at(i);
}

TEST(Unet3d, LayersAndNamedSkips) {
  graph::Model m = small_unet(3);
  EXPECT_EQ(layer_names(m), (std::vector<std::string>{
                                "enc0.conv0", "enc0.conv1", "pool0", "enc1.conv0", "enc1.conv1",
                                "pool1", "bottom.conv0", "bottom.conv1", "up1", "dec1.conv0",
                                "dec1.conv1", "up0", "dec0.conv0", "dec0.conv1", "final"}));
  EXPECT_EQ(layer(m, "enc0.conv1").outputs, std::vector<std::string>{"skip0"});
  EXPECT_EQ(layer(m, "enc1.conv1").outputs, std::vector<std::string>{"skip1"});
  EXPECT_EQ(layer(m, "dec1.conv0").inputs, (std::vector<std::string>{"up1", "skip1"}));
  EXPECT_EQ(layer(m, "dec0.conv0").inputs, (std::vector<std::string>{"up0", "skip0"}));
  EXPECT_EQ(layer(m, "final").outputs, std::vector<std::string>{"output"});
  EXPECT_EQ(m.metric_name, "dice");
  EXPECT_NO_THROW(m.validate());
}

// Under bf16 on CPU devices the transposed convolution is one matrix product (LibTorch's CPU
// autocast would run it in fp32): its output, in bf16, and the gradients of its input and weights
// are the fp32 transposed convolution's within bf16's rounding.
TEST(Unet3d, UpLayerInBf16IsTheTransposedConvolution) {
  const std::string why = graph::reduced_precision_refusal(c10::kCPU, c10::kBFloat16);
  if (!why.empty()) GTEST_SKIP() << "this processor's kernels compute no bf16: " << why;
  graph::Model m = small_unet(2);
  const graph::Layer& up = layer(m, "up0");
  const auto params = up.module->parameters();
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({2, 8, 3, 4, 5});
  const torch::Tensor g = torch::randn({2, 4, 6, 8, 10});
  auto run = [&](bool bf16) {
    for (auto p : params) p.mutable_grad() = torch::Tensor();
    torch::Tensor in = x.clone().requires_grad_(true);
    torch::Tensor y;
    {
      graph::ScopedAutocast autocast(c10::kCPU, bf16 ? c10::kBFloat16 : c10::kFloat);
      y = up.forward({in})[0];
    }
    EXPECT_EQ(y.scalar_type(), bf16 ? torch::kBFloat16 : torch::kFloat);
    y.backward(g.to(y.scalar_type()));
    std::vector<torch::Tensor> out{y.to(torch::kFloat), in.grad()};
    for (const auto& p : params) out.push_back(p.grad().clone());
    return out;
  };
  const auto want = run(false), got = run(true);
  ASSERT_EQ(got.size(), 4u);  // output, input gradient, weight and bias gradients
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = (got[i] - want[i]).abs().max().item<double>();
    EXPECT_LT(err, 0.02 * want[i].abs().max().item<double>()) << "tensor " << i;
    EXPECT_GT(want[i].abs().max().item<double>(), 0) << "tensor " << i;
  }
}

// In bf16 a sigmoid reaches exactly 1 from a logit of about 6.2 on, where the Dice+BCE loss of a
// voxel whose mask is 0 and its gradient blow up: the last layer gives fp32 probabilities under
// bf16, from the bf16 convolution's logits.
TEST(Unet3d, LastLayerInBf16GivesFp32Probabilities) {
  const std::string why = graph::reduced_precision_refusal(c10::kCPU, c10::kBFloat16);
  if (!why.empty()) GTEST_SKIP() << "this processor's kernels compute no bf16: " << why;
  EXPECT_EQ(torch::sigmoid(torch::full({1}, 8.0).to(torch::kBFloat16)).item<double>(), 1.0);
  EXPECT_LT(torch::sigmoid(torch::full({1}, 8.0)).item<double>(), 1.0);
  graph::Model m = small_unet(2);
  const graph::Layer& last = layer(m, "final");
  const auto conv = std::dynamic_pointer_cast<torch::nn::Conv3dImpl>(last.module);
  ASSERT_TRUE(conv);
  torch::NoGradGuard no_grad;
  // Logits of 8 (channels a power of 2: exact in bf16): weights of 1 / channels, inputs of 8.
  const int64_t channels = conv->weight.size(1);
  conv->weight.fill_(1.0 / static_cast<double>(channels));
  conv->bias.zero_();
  const torch::Tensor x = torch::full({1, channels, 2, 2, 2}, 8.0);
  torch::Tensor y;
  {
    graph::ScopedAutocast autocast(c10::kCPU, c10::kBFloat16);
    y = last.forward({x.to(torch::kBFloat16)})[0];
  }
  EXPECT_EQ(y.scalar_type(), torch::kFloat);
  EXPECT_LT(y.max().item<double>(), 1.0) << "a probability rounded to 1";
}

TEST(Unet3d, OutputShapeAndRangeForEachDepth) {
  for (int levels : {1, 2, 3}) {
    graph::Model m = small_unet(levels);
    torch::NoGradGuard no_grad;
    torch::Tensor y = reference_forward(m, torch::randn({2, 1, 16, 16, 16}));
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 1, 16, 16, 16})) << levels << " levels";
    EXPECT_GT(y.min().item<double>(), 0.0);
    EXPECT_LT(y.max().item<double>(), 1.0);
  }
}

TEST(Unet3d, ChannelsDoublePerLevelAndParametersAddUp) {
  models::Unet3dOptions o;
  o.levels = 2;
  o.filters = 4;
  o.in_channels = 2;
  graph::Model m = models::unet3d(o);
  auto conv = [](int64_t in, int64_t out, int64_t k) { return in * out * k * k * k + out; };
  // enc0: 2->4, 4->4; bottom: 4->8, 8->8; up0: 8->4 (2^3); dec0: 8->4, 4->4; final 4->1.
  const int64_t want = conv(2, 4, 3) + conv(4, 4, 3) + conv(4, 8, 3) + conv(8, 8, 3) +
                       conv(8, 4, 2) + conv(8, 4, 3) + conv(4, 4, 3) + conv(4, 1, 1);
  EXPECT_EQ(m.parameter_count(), want);
  torch::NoGradGuard no_grad;
  EXPECT_EQ(reference_forward(m, torch::randn({1, 2, 8, 8, 8})).sizes(),
            (std::vector<int64_t>{1, 1, 8, 8, 8}));
}

TEST(Unet3d, FlopsFollowTheVolumeAtEachLevel) {
  graph::Model known = small_unet(2);  // volume 16
  EXPECT_DOUBLE_EQ(layer(known, "enc0.conv0").forward_flops_per_sample, 2.0 * 1 * 4 * 27 * 4096);
  EXPECT_DOUBLE_EQ(layer(known, "bottom.conv1").forward_flops_per_sample, 2.0 * 8 * 8 * 27 * 512);
  EXPECT_DOUBLE_EQ(layer(known, "up0").forward_flops_per_sample, 2.0 * 8 * 4 * 8 * 512);
  EXPECT_DOUBLE_EQ(layer(known, "dec0.conv0").forward_flops_per_sample, 2.0 * 8 * 4 * 27 * 4096);
  EXPECT_DOUBLE_EQ(layer(known, "final").forward_flops_per_sample, 2.0 * 4 * 1 * 4096);
  models::Unet3dOptions o;
  o.levels = 2;
  o.filters = 4;
  EXPECT_EQ(models::unet3d(o).layers[0].forward_flops_per_sample, 0.0);  // volume unknown
}

TEST(Unet3d, DropoutLayerOnlyWhenAsked) {
  EXPECT_LT(small_unet(2).find_layer("bottom.dropout"), 0);
  graph::Model m = small_unet(2, 0.5);
  EXPECT_EQ(m.find_layer("bottom.dropout"), m.find_layer("bottom.conv1") + 1);
  EXPECT_EQ(layer(m, "up0").inputs, std::vector<std::string>{"bottom.dropped"});
}

TEST(Unet3d, BadOptionsSayWhatToUse) {
  auto build = [](models::Unet3dOptions o) { return error_of([&] { models::unet3d(o); }); };
  models::Unet3dOptions o;
  o.levels = 0;
  EXPECT_NE(build(o).find("at least 1 level"), std::string::npos);
  o = {};
  o.filters = 0;
  EXPECT_NE(build(o).find("at least 1 filter"), std::string::npos);
  o = {};
  o.dropout = 1.0;
  EXPECT_NE(build(o).find("[0, 1)"), std::string::npos);
  o = {};
  o.levels = 4;
  o.volume = 36;
  EXPECT_NE(build(o).find("divisible by 8, not 36: use a side of 40, or at most 3 levels"),
            std::string::npos)
      << build(o);
  o.volume = 7;
  EXPECT_NE(build(o).find("divisible by 8, not 7: use a side of 8, or at most 1 level"),
            std::string::npos)
      << build(o);
  o.levels = 9;
  o.volume = 32;
  EXPECT_NE(build(o).find("divisible by 256, not 32: use a side of 256, or at most 6 levels"),
            std::string::npos)
      << build(o);
}

TEST(Unet3d, AnOddSideIsReportedByThePoolLayer) {
  models::Unet3dOptions o;
  o.levels = 3;
  o.filters = 2;
  graph::Model m = models::unet3d(o);
  torch::NoGradGuard no_grad;
  const std::string e = error_of([&] { reference_forward(m, torch::randn({1, 1, 6, 8, 8})); });
  EXPECT_NE(e.find("'pool1'"), std::string::npos) << e;
  EXPECT_NE(e.find("divisible by 4"), std::string::npos) << e;
}

TEST(DiceLoss, KnownValues) {
  torch::Tensor t = torch::zeros({3, 1, 4, 4, 4});
  t[0].fill_(1);                  // 64 voxels
  t[1].narrow(1, 0, 2).fill_(1);  // 32 voxels
  torch::Tensor p = t.clone();    // perfect
  EXPECT_NEAR(models::soft_dice_loss(p, t).item<double>(), 0.0, 1e-7);
  p = torch::zeros_like(t);
  // Sample 0: 1 - 1/65, sample 1: 1 - 1/33, sample 2 (both empty): 0.
  EXPECT_NEAR(models::soft_dice_loss(p, t).item<double>(), (64.0 / 65 + 32.0 / 33) / 3, 1e-6);
  p = torch::full_like(t, 0.5);
  // Sample 0: 1 - (64 + 1) / (32 + 64 + 1).
  EXPECT_NEAR(models::soft_dice_loss(p.narrow(0, 0, 1), t.narrow(0, 0, 1)).item<double>(),
              1.0 - 65.0 / 97, 1e-6);
}

// The property the pipeline relies on: the loss of a batch is the size-weighted sum of the
// losses of any split into micro-batches, and so is its gradient.
TEST(DiceLoss, DecomposesOverUnevenMicrobatches) {
  VolumeData d = segmentation_data(7, 8);
  torch::Tensor p = torch::sigmoid(d.input).requires_grad_(true);
  for (auto loss : {models::soft_dice_loss, models::bce_loss}) {
    torch::Tensor whole = loss(p, d.target);
    torch::Tensor g_whole = torch::autograd::grad({whole}, {p})[0];
    torch::Tensor parts = torch::zeros({});
    for (auto [offset, size] : {std::pair<int64_t, int64_t>{0, 3}, {3, 1}, {4, 3}}) {
      parts =
          parts + loss(p.narrow(0, offset, size), d.target.narrow(0, offset, size)) * (size / 7.0);
    }
    torch::Tensor g_parts = torch::autograd::grad({parts}, {p})[0];
    EXPECT_NEAR(parts.item<double>(), whole.item<double>(), 1e-6);
    EXPECT_LE((g_parts - g_whole).abs().max().item<double>(),
              1e-6 * g_whole.abs().max().item<double>());
  }
  // A Dice over the whole batch at once would not decompose.
  auto global_dice = [](const torch::Tensor& o, const torch::Tensor& t) {
    return 1 - (2 * (o * t).sum() + 1) / (o.sum() + t.sum() + 1);
  };
  torch::Tensor whole = global_dice(p, d.target);
  torch::Tensor parts = global_dice(p.narrow(0, 0, 3), d.target.narrow(0, 0, 3)) * (3 / 7.0) +
                        global_dice(p.narrow(0, 3, 4), d.target.narrow(0, 3, 4)) * (4 / 7.0);
  EXPECT_GT(std::abs(parts.item<double>() - whole.item<double>()), 1e-4);
}

TEST(DiceLoss, BceIsAddedWhenAsked) {
  VolumeData d = segmentation_data(2, 8);
  graph::Model plain = small_unet(1);
  graph::Model with_bce = small_unet(1, 0.0, /*bce=*/true);
  torch::Tensor p = torch::sigmoid(d.input);
  EXPECT_NEAR(with_bce.loss(p, d.target).item<double>(),
              plain.loss(p, d.target).item<double>() + models::bce_loss(p, d.target).item<double>(),
              1e-6);
}

TEST(DiceLoss, ShapeMismatchIsAUserError) {
  const std::string e = error_of([] {
    models::soft_dice_loss(torch::zeros({2, 1, 4, 4, 4}), torch::zeros({2, 1, 4, 4, 2}));
  });
  EXPECT_NE(e.find("[2,1,4,4,4] and [2,1,4,4,2]"), std::string::npos) << e;
}

TEST(HardDice, SumsPerSampleScores) {
  torch::Tensor t = torch::zeros({4, 1, 2, 2, 2});
  torch::Tensor p = torch::zeros({4, 1, 2, 2, 2});
  t[0].fill_(1);
  p[0].fill_(0.9);  // perfect: 1
  // Sample 1: both empty: 1.
  t[2].view({-1}).narrow(0, 0, 4).fill_(1);
  p[2].view({-1}).narrow(0, 4, 4).fill_(0.7);  // disjoint: 0
  t[3].view({-1}).narrow(0, 0, 4).fill_(1);
  p[3].view({-1}).narrow(0, 2, 4).fill_(0.6);  // overlap 2 of 4 and 4: 2*2/8 = 0.5
  p[3].view({-1})[0] = 0.5;                    // not above the threshold
  EXPECT_DOUBLE_EQ(models::hard_dice_sum(p, t), 1.0 + 1.0 + 0.0 + 0.5);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

using namespace model_testing;

// Forward only, the U-Net's convolutions, skip concatenations and up-sampling of a volume large
// enough run in chunks of planes (split_conv.h): the same output within float rounding (bitwise
// on this machine, as each output voxel sums the same products in the same order).
TEST(Unet3d, ForwardOnlyInChunksEqualsTheWholeForward) {
  const graph::Model m = small_unet(2);
  torch::manual_seed(9);
  const torch::Tensor x = torch::randn({1, 1, 40, 96, 96});  // up0's output: 5.9 MB
  const torch::Tensor whole = reference_forward(m, x, 0, 0, 0, /*training=*/false).detach();
  torch::NoGradGuard no_grad;
  const torch::Tensor chunked = reference_forward(m, x, 0, 0, 0, /*training=*/false);
  EXPECT_LE(relative_error(chunked, whole), 1e-5);
  // It did run in chunks: up0's output (4 channels of 40x96x96 floats) starts them.
  EXPECT_TRUE(spatial::chunks_forward(int64_t{4} * 40 * 96 * 96 * 4));
}

}  // namespace
}  // namespace tandem
