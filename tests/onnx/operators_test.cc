// Every operator against PyTorch (or loops written from the ONNX specification) on graphs of
// one operator, from fixtures.py's ops/ folder.
//
// Tolerance: 1e-5 of the expected tensor's largest magnitude. The same LibTorch kernels run on
// both sides for most cases; where tandem computes differently (explicit padding before a
// convolution, resizing by gathers and a lerp, the BCE-free paths) float32 rounding of a few
// operations per value stays far below it.
#include "onnx_test_util.h"
#include "tandem/graph/precision.h"
#include "tandem/models/layers.h"
#include "tandem/onnx/load.h"

namespace tandem {
namespace {

class Operator : public ::testing::TestWithParam<std::string> {};

graph::Model load_case(const std::string& name) {
  onnx::LoadOptions o;
  o.loss = "mse";  // no final operator taken over: the model's output is the graph's
  return onnx::load(testing::fixture("ops/" + name + ".onnx"), o);
}

TEST_P(Operator, MatchesReference) {
  const std::string name = GetParam();
  const graph::Model model = load_case(name);
  auto data = testing::load_pt("ops/" + name + ".pt");
  const torch::Tensor y = testing::run_forward(model, data.at("input"), /*training=*/false);
  const torch::Tensor& want = data.at("expected");
  ASSERT_EQ(y.sizes(), want.sizes()) << name;
  EXPECT_LT(testing::relative_difference(y, want), 1e-5) << name;
  if (data.count("train")) {
    const torch::Tensor t = testing::run_forward(model, data.at("input"), /*training=*/true);
    EXPECT_LT(testing::relative_difference(t, data.at("train")), 1e-5) << name << " (training)";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Onnx, Operator,
    ::testing::Values(
        "conv2d_asymmetric", "conv1d_same_upper", "conv1d_same_lower", "conv3d", "conv_transpose2d",
        "conv_transpose_asymmetric", "conv_transpose_output_shape", "conv_transpose3d",
        "gemm_alpha_beta", "gemm_trans_b", "matmul_add_bias", "matmul_transposed_weight",
        "add_broadcast", "sub_broadcast", "mul_broadcast", "div_broadcast", "leaky_relu",
        "sigmoid_tanh_relu", "softmax_axis2", "softmax_opset11_coerced", "log_softmax_last",
        "maxpool_pads_ceil", "maxpool_asymmetric", "maxpool3d_dilated", "maxpool3d_tiles",
        "avgpool_exclude_pad", "avgpool_asymmetric", "global_average_pool", "batch_normalization",
        "instance_normalization", "concat_last", "flatten", "reshape_copy_dims",
        "reshape_batch_minus_one", "transpose", "squeeze_axes_input", "squeeze_opset11_attribute",
        "unsqueeze_axes_input", "unsqueeze_opset11_attribute", "resize_nearest_asymmetric_floor",
        "resize_linear_half_pixel", "resize_linear_align_corners_sizes",
        "resize_nearest_half_pixel_sizes", "resize_trilinear", "upsample_nearest", "pad_constant",
        "pad_reflect", "pad_edge_3d", "constant_identity", "dropout", "erf_sqrt_pow",
        "gelu_exported", "clip_relu6", "clip_min_only", "prelu_per_channel", "reduce_mean_keepdims",
        "reduce_mean_drop", "layer_norm", "view_flatten", "gather_channels"),
    [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Under a bf16 autocast on the CPU, LibTorch's max_pool3d runs on an fp32 copy of its input
// (kept for the backward) and gives fp32; a MaxPool whose windows tile the volume keeps bf16,
// with max_pool3d's output and gradient (of an fp32 copy) bit for bit.
TEST(OnnxOperators, ATilingMaxPool3dKeepsBf16UnderAutocast) {
  const graph::Model model = load_case("maxpool3d_tiles");
  const torch::Tensor x0 = testing::load_pt("ops/maxpool3d_tiles.pt").at("input");
  torch::Tensor x = x0.to(torch::kBFloat16).requires_grad_(true);
  torch::Tensor y;
  {
    graph::ScopedAutocast autocast(c10::kCPU, c10::kBFloat16);
    y = testing::run_forward(model, x, /*training=*/true);
  }
  torch::manual_seed(4);
  const torch::Tensor g = torch::randn(y.sizes()).to(torch::kBFloat16);
  y.backward(g);
  torch::Tensor x32 = x0.to(torch::kBFloat16).to(torch::kFloat).requires_grad_(true);
  const torch::Tensor want = torch::max_pool3d(x32, {2, 1, 2}, {2, 1, 2});
  want.backward(g.to(torch::kFloat));
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y.detach(), want.detach().to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(x.grad(), x32.grad().to(torch::kBFloat16)));
}

// A single micro-batch of one sample keeps its batch axis through operators that squeeze
// every axis of size 1.
TEST(OnnxOperators, SqueezeWithoutAxesKeepsTheBatch) {
  const graph::Model model = load_case("squeeze_axes_input");
  const torch::Tensor x = torch::randn({1, 1, 3, 1});
  EXPECT_EQ(testing::run_forward(model, x, false).sizes(), (std::vector<int64_t>{1, 1, 3}));
}

// Dropout draws tandem's keyed masks in training (the same as models::KeyedDropout in the same
// call) and passes its input through in evaluation.
TEST(OnnxOperators, DropoutIsTandemsKeyedDropout) {
  const graph::Model model = load_case("dropout");
  const torch::Tensor x = torch::randn({4, 3, 4, 5});
  const torch::Tensor trained = testing::run_forward(model, x, /*training=*/true);
  graph::CallContext call;
  call.layer = 0;
  graph::ScopedCall scoped(call);
  models::KeyedDropout reference(0.3);
  EXPECT_TRUE(torch::equal(trained, reference->forward(x)));
  EXPECT_GT((trained == 0).sum().item<int64_t>(), 0);
}

// The weights of MatMul, and the bias of the Add after it, are trained parameters; so is an
// initializer a MatMul reads through a Transpose (computed inside the MatMul's layer).
TEST(OnnxOperators, MatMulWeightsAndBiasesAreParameters) {
  for (const char* name : {"matmul_add_bias", "matmul_transposed_weight"}) {
    const graph::Model model = load_case(name);
    std::vector<std::string> names;
    for (const auto& layer : model.layers)
      for (const auto& [n, p] : graph::named_parameters(layer)) {
        names.push_back(n);
        EXPECT_TRUE(p.requires_grad()) << n;
      }
    if (std::string(name) == "matmul_add_bias") {
      EXPECT_EQ(names, (std::vector<std::string>{"w", "bias"}));
    } else {
      EXPECT_EQ(names, (std::vector<std::string>{"w"}));
      EXPECT_EQ(model.layers.size(), 1u);  // the Transpose runs inside the MatMul's layer
    }
  }
}

TEST(OnnxOperators, EveryOperatorOfTheListIsSupported) {
  const std::vector<std::string> want = {"Add",
                                         "AveragePool",
                                         "BatchNormalization",
                                         "Cast",
                                         "Clip",
                                         "Concat",
                                         "Constant",
                                         "Conv",
                                         "ConvTranspose",
                                         "Div",
                                         "Dropout",
                                         "Erf",
                                         "Flatten",
                                         "Gather",
                                         "Gemm",
                                         "GlobalAveragePool",
                                         "Identity",
                                         "InstanceNormalization",
                                         "LayerNormalization",
                                         "LeakyRelu",
                                         "LogSoftmax",
                                         "MatMul",
                                         "MaxPool",
                                         "Mul",
                                         "PRelu",
                                         "Pad",
                                         "Pow",
                                         "ReduceMean",
                                         "Relu",
                                         "Reshape",
                                         "Resize",
                                         "Shape",
                                         "Sigmoid",
                                         "Softmax",
                                         "Sqrt",
                                         "Squeeze",
                                         "Sub",
                                         "Tanh",
                                         "Transpose",
                                         "Unsqueeze",
                                         "Upsample"};
  EXPECT_EQ(onnx::supported_operators(), want);
}

}  // namespace
}  // namespace tandem
