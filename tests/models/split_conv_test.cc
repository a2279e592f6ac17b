// Conv3d and Linear layers split their backward: under zb-h1 the input gradient is computed in I
// and the weight gradients in W, and the result equals the one-device gradients (tolerance as in
// the volume equivalence tests: 3e-5 of the largest magnitude, reordered fp32 sums over voxels).
#include "tandem/models/split_conv.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/graph/call_context.h"
#include "tandem/graph/deferred.h"
#include "tandem/models/conv3d_stack.h"
#include "tandem/models/split_linear.h"
#include "tandem/runtime/pipeline.h"
#include "tandem/schedule/action.h"
#include "tandem/spatial/forward_chunks.h"
#include "volume_models.h"

namespace tandem {
namespace {

graph::Model stack() {
  torch::manual_seed(5);
  models::Conv3dStackOptions o;
  o.convs = 4;
  o.filters = 4;
  return models::conv3d_stack(o);
}

// 3 micro-batches of 2 samples, and 6 of 1: single samples run as folded depth slabs
// (DepthFold), in I and again in W.
TEST(SplitConv, ZeroBubbleGradientsEqualOneDevice) {
  torch::Tensor x = torch::randn({6, 1, 8, 8, 8}), y = torch::randn({6, 1, 8, 8, 8});
  graph::Model ref = stack();
  torch::Tensor h = x;
  for (auto& l : ref.layers) h = l.forward({h})[0];
  ref.loss(h, y).backward();
  std::map<std::string, torch::Tensor> want;
  for (auto& l : ref.layers)
    for (auto& p : graph::named_parameters(l)) want[p.first] = p.second.grad();

  for (int microbatches : {3, 6}) {
    runtime::PipelineOptions o;
    o.devices = parse_devices("2", 1);
    o.schedule = "zb-h1";
    o.microbatches = microbatches;
    graph::Model m = stack();
    auto part = graph::partition_by_balance(m, {2, 2});
    runtime::Pipeline p(std::move(m), part, o);
    p.forward_backward(x, y);
    int weight_actions = 0;
    for (const auto& t : p.last_timings()) weight_actions += t.action.op == schedule::Op::kWeight;
    EXPECT_EQ(weight_actions, 2 * microbatches);
    EXPECT_NE(p.placement_table().find("yes"), std::string::npos) << p.placement_table();
    for (auto& [name, t] : p.named_parameters()) {
      const double scale = want.at(name).abs().max().item<double>();
      EXPECT_LE((t.grad() - want.at(name)).abs().max().item<double>(), 3e-5 * scale + 1e-7)
          << name << ", " << microbatches << " micro-batches";
    }
  }
}

// The model's input needs no gradient: the layers skip it and still give the weight gradients
// of the plain ops (and the input gradient when it is asked for).
TEST(SplitLayers, WeightGradientsWithAndWithoutAnInputGradient) {
  torch::manual_seed(9);
  for (bool input_grad : {false, true}) {
    torch::Tensor x = torch::randn({2, 3, 6, 6, 6}).requires_grad_(input_grad);
    torch::Tensor w = torch::randn({4, 3, 3, 3, 3}).requires_grad_(true);
    torch::Tensor b = torch::randn({4}).requires_grad_(true);
    models::split_conv3d(x, w, b, 1).square().sum().backward();
    torch::Tensor xr = x.detach().clone().requires_grad_(input_grad);
    torch::Tensor wr = w.detach().clone().requires_grad_(true);
    torch::Tensor br = b.detach().clone().requires_grad_(true);
    torch::conv3d(xr, wr, br, 1, 1).square().sum().backward();
    EXPECT_TRUE(torch::allclose(w.grad(), wr.grad(), 1e-4, 1e-3))
        << "conv, input_grad " << input_grad;
    EXPECT_TRUE(torch::allclose(b.grad(), br.grad(), 1e-4, 1e-3));
    EXPECT_EQ(x.grad().defined(), input_grad);
    if (input_grad) {
      EXPECT_TRUE(torch::allclose(x.grad(), xr.grad(), 1e-4, 1e-3));
    }

    torch::Tensor v = torch::randn({5, 7}).requires_grad_(input_grad);
    torch::Tensor lw = torch::randn({3, 7}).requires_grad_(true);
    torch::Tensor lb = torch::randn({3}).requires_grad_(true);
    models::split_linear(v, lw, lb).square().sum().backward();
    torch::Tensor lwr = lw.detach().clone().requires_grad_(true);
    torch::Tensor lbr = lb.detach().clone().requires_grad_(true);
    torch::nn::functional::linear(v.detach(), lwr, lbr).square().sum().backward();
    EXPECT_TRUE(torch::allclose(lw.grad(), lwr.grad(), 1e-5, 1e-4))
        << "linear, input_grad " << input_grad;
    EXPECT_TRUE(torch::allclose(lb.grad(), lbr.grad(), 1e-5, 1e-4));
    EXPECT_EQ(v.grad().defined(), input_grad);
  }
}

// The decoder's convolution of a concatenation, taken part by part (each part with its
// channels of the weight, so that no concatenated copy is kept): the gradients of
// torch::conv3d of the concatenation, for the parts, the weight and the bias.
TEST(SplitConv, AConcatenationByPartsHasTheGradientsOfTheConcatenation) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({2, 3, 6, 6, 6}), skip = torch::randn({2, 2, 6, 6, 6});
  const torch::Tensor w0 = torch::randn({4, 5, 3, 3, 3}), b0 = torch::randn({4});
  auto grads = [&](bool by_parts) {
    torch::Tensor a = x.clone().requires_grad_(true), c = skip.clone().requires_grad_(true);
    torch::Tensor w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    const torch::Tensor y = by_parts ? models::split_conv3d_concat({a, c}, w, b, 1)
                                     : torch::conv3d(torch::cat({a, c}, 1), w, b, 1, 1);
    y.square().sum().backward();
    return std::vector<torch::Tensor>{a.grad(), c.grad(), w.grad(), b.grad()};
  };
  const auto got = grads(true), want = grads(false);
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = want[i].abs().max().item<double>();
    EXPECT_LE((got[i] - want[i]).abs().max().item<double>(), 3e-5 * scale) << "gradient " << i;
  }
}

// In bf16 the parts' gradients are computed part by part (no concatenation held beside
// oneDNN's blocked copy), whole and with the weight work deferred as zb-h1 runs it: within
// bf16's rounding of the fp32 gradients of the concatenation, as close as LibTorch's own bf16
// convolution of the concatenation is; a gradient left out of one part is far outside it.
TEST(SplitConv, ABf16ConcatenationByPartsHasTheGradientsOfTheConcatenation) {
  torch::manual_seed(6);
  const torch::Tensor x = torch::randn({2, 8, 6, 6, 6}).to(torch::kBFloat16);
  const torch::Tensor skip = torch::randn({2, 8, 6, 6, 6}).to(torch::kBFloat16);
  const torch::Tensor w0 = torch::randn({4, 16, 3, 3, 3}).to(torch::kBFloat16);
  const torch::Tensor b0 = torch::randn({4}).to(torch::kBFloat16);
  // 0: LibTorch's convolution of the concatenation in fp32 (the reference); 1: the same in
  // bf16; 2: by parts; 3: by parts, the weight work deferred and run afterwards.
  auto grads = [&](int how) {
    const auto type = how == 0 ? torch::kFloat32 : torch::kBFloat16;
    // Fresh leaves for each way (.to of the same type would give the tensor itself).
    auto leaf = [&](const torch::Tensor& t) { return t.to(type).clone().requires_grad_(true); };
    torch::Tensor a = leaf(x), c = leaf(skip), w = leaf(w0), b = leaf(b0);
    graph::DeferredWeightGrads queue;
    graph::CallContext call;
    call.deferred = how == 3 ? &queue : nullptr;
    torch::Tensor y;
    {
      graph::ScopedCall scoped(call);
      y = how >= 2 ? models::split_conv3d_concat({a, c}, w, b, 1)
                   : torch::conv3d(torch::cat({a, c}, 1), w, b, 1, 1);
    }
    queue.set_deferring(how == 3);
    torch::autograd::backward({y}, {torch::ones_like(y)});
    queue.set_deferring(false);
    queue.run_all();
    std::vector<torch::Tensor> out;
    for (const torch::Tensor& t : {a, c, w, b}) out.push_back(t.grad().to(torch::kFloat32));
    return out;
  };
  const auto want = grads(0), torch_bf16 = grads(1);
  for (int how : {2, 3}) {
    const auto got = grads(how);
    for (size_t i = 0; i < got.size(); ++i) {
      const double scale = want[i].abs().max().item<double>();
      const double own = (torch_bf16[i] - want[i]).abs().max().item<double>();
      const double off = (got[i] - want[i]).abs().max().item<double>();
      EXPECT_LE(off, std::max(2 * own, scale / 256)) << "gradient " << i << ", way " << how;
      EXPECT_GT(got[i].abs().max().item<double>(), scale / 2) << "gradient " << i;
    }
  }
  // The tolerance catches a part whose gradient is lost.
  EXPECT_GT(want[1].abs().max().item<double>(),
            100 * (torch_bf16[1] - want[1]).abs().max().item<double>());
}

// The same under zb-h1 in a U-Net: the deferred weight gradients of the parts land in their
// channels of the one weight (graph::accumulate_grad of a slice), on 2 stages with skips across.
TEST(SplitConv, ZeroBubbleUnetGradientsEqualOneDevice) {
  model_testing::VolumeData d = model_testing::segmentation_data(4, 16);
  const auto want = model_testing::reference_grads(model_testing::small_unet(2), d);
  runtime::PipelineOptions o;
  o.devices = parse_devices("2", 1);
  o.schedule = "zb-h1";
  o.microbatches = 2;
  graph::Model m = model_testing::small_unet(2);
  auto part = graph::partition_by_balance(m, {5, 4});
  runtime::Pipeline p(std::move(m), part, o);
  p.forward_backward(d.input, d.target);
  for (auto& [name, t] : p.named_parameters()) {
    ASSERT_TRUE(t.grad().defined()) << name;
    const double scale = want.at(name).abs().max().item<double>();
    EXPECT_LE((t.grad() - want.at(name)).abs().max().item<double>(), 3e-5 * scale + 1e-7) << name;
  }
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

double relative(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

// Forward only, a volume whose output reaches kForwardChunkBytes runs in chunks of planes:
// the same values as the whole convolution (within float rounding), for a depth that the
// chunks do not divide, a 3x3x3 and a 1x1x1 kernel, two samples, and a concatenation.
TEST(ForwardChunks, EqualTheWholeConvolution) {
  EXPECT_EQ(spatial::forward_chunks(70).size(), 8u);  // 9 planes each, 7 in the last
  EXPECT_EQ(spatial::forward_chunks(70).back(), (std::pair<int64_t, int64_t>{63, 7}));
  EXPECT_EQ(spatial::forward_chunks(3).size(), 3u);
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({2, 3, 70, 40, 40});
  const torch::Tensor skip = torch::randn({2, 2, 70, 40, 40});
  for (int64_t k : {3, 1}) {
    const int64_t padding = k / 2;
    const torch::Tensor w = torch::randn({8, 5, k, k, k});
    const torch::Tensor b = torch::randn({8});
    const torch::Tensor want = torch::conv3d(torch::cat({x, skip}, 1), w, b, 1, padding);
    ASSERT_GE(want.numel() * 4, spatial::kForwardChunkBytes);
    torch::NoGradGuard no_grad;
    ASSERT_TRUE(spatial::chunks_forward(want.numel() * 4));
    const torch::Tensor got = models::split_conv3d_concat({x, skip}, w, b, padding);
    EXPECT_EQ(got.sizes(), want.sizes());
    EXPECT_LE(relative(got, want), 1e-6) << "kernel " << k;
    const torch::Tensor alone = models::split_conv3d(x, w.narrow(1, 0, 3), b, padding);
    EXPECT_LE(relative(alone, torch::conv3d(x, w.narrow(1, 0, 3), b, 1, padding)), 1e-6);
  }
  // With autograd the convolution is whole.
  EXPECT_FALSE(spatial::chunks_forward(int64_t{1} << 30));
}

}  // namespace
}  // namespace tandem
