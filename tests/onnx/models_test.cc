// PyTorch -> ONNX -> tandem: the exported MLP, 2D CNN with batch normalization and 3D U-Net
// with instance normalization, and a graph written as tf2onnx writes a Keras model, compute
// what PyTorch computed (fixtures.py), under the state-dict names of the PyTorch module.
//
// Tolerance: 1e-5 of the largest output magnitude: the same LibTorch kernels on both sides;
// what differs is summation order where tandem computes otherwise (a folded softmax, an
// explicit pad), a few float32 roundings.
#include "onnx_test_util.h"
#include "tandem/graph/call_context.h"
#include "tandem/onnx/load.h"
#include "tandem/runtime/pipeline.h"

namespace tandem {
namespace {

graph::Model load(const std::string& name, const std::string& loss = "mse") {
  onnx::LoadOptions o;
  o.loss = loss;
  return onnx::load(testing::fixture(name + ".onnx"), o);
}

void expect_forward(const std::string& name) {
  const graph::Model model = load(name);
  auto data = testing::load_pt(name + "_forward.pt");
  for (const bool training : {true, false}) {
    const torch::Tensor y = testing::run_forward(model, data.at("input"), training);
    const torch::Tensor& want = data.at(training ? "train" : "eval");
    ASSERT_EQ(y.sizes(), want.sizes()) << name;
    EXPECT_LT(testing::relative_difference(y, want), 1e-5)
        << name << (training ? " in training" : " in evaluation");
  }
}

TEST(OnnxModels, MlpForwardEqualsPyTorch) { expect_forward("mlp"); }
TEST(OnnxModels, CnnWithBatchNormForwardEqualsPyTorch) { expect_forward("cnn_bn"); }
TEST(OnnxModels, Unet3dWithInstanceNormForwardEqualsPyTorch) { expect_forward("unet3d"); }
TEST(OnnxModels, KerasStyleGraphForwardEqualsReference) { expect_forward("keras"); }
// GroupNorm, PReLU, ReLU6, x.view(x.size(0), -1), LayerNorm and GELU as PyTorch exports them.
TEST(OnnxModels, BlocksBeyondConvolutionsForwardEqualsPyTorch) { expect_forward("blocks"); }
// The Keras 3D U-Net (examples/onnx/keras_unet3d.py): fed and read channels-first.
TEST(OnnxModels, KerasUnet3dForwardEqualsReference) { expect_forward("keras_unet3d"); }

// A channels-last graph's first and last Transposes are taken over: the model reads
// [B,C,D,H,W] and its output, after the Sigmoid the loss takes over, is channels-first.
TEST(OnnxModels, ChannelsLastGraphIsFedAndReadChannelsFirst) {
  const graph::Model m = load("keras_unet3d", "dice+bce");
  EXPECT_EQ(m.input_shape, (std::vector<int64_t>{1, 8, 8, 8}));
  EXPECT_EQ(m.input, "input_1__to_ncdhw");
  EXPECT_EQ(m.output, "model/conv3d_4/BiasAdd:0");
  for (const graph::Layer& l : m.layers) {
    EXPECT_NE(l.name, "input_1__to_ncdhw");
    EXPECT_NE(l.name, "model/output/Sigmoid__to_ndhwc");
  }
  EXPECT_EQ(m.slab_refusal, "");
  EXPECT_EQ(m.slab_dim, 2);
  EXPECT_EQ(m.slab_multiple, 2);
}

std::vector<std::string> state_names(const graph::Model& model) {
  std::vector<std::string> names;
  for (const auto& layer : model.layers) {
    for (const auto& [n, t] : graph::named_parameters(layer)) names.push_back(n);
    for (const auto& [n, t] : graph::named_buffers(layer)) names.push_back(n + " (buffer)");
  }
  return names;
}

// Initializers keep the PyTorch state-dict names; batch normalization's running statistics are
// buffers, with PyTorch's num_batches_tracked beside them.
TEST(OnnxModels, InitializersKeepTheirStateDictNames) {
  EXPECT_EQ(state_names(load("cnn_bn")),
            (std::vector<std::string>{"conv.weight", "conv.bias", "bn.weight", "bn.bias",
                                      "bn.running_mean (buffer)", "bn.running_var (buffer)",
                                      "bn.num_batches_tracked (buffer)", "conv2.weight",
                                      "conv2.bias", "fc.weight", "fc.bias"}));
  // A normalization's scale and shift written as Mul and Add (GroupNorm; LayerNorm before
  // opset 17) are trained, as the PReLU's slope is.
  EXPECT_EQ(
      state_names(load("blocks")),
      (std::vector<std::string>{"conv.weight", "conv.bias", "norm.weight", "norm.bias",
                                "act.weight", "conv2.weight", "conv2.bias", "fc.weight", "fc.bias",
                                "ln.weight", "ln.bias", "head.weight", "head.bias"}));
  EXPECT_EQ(state_names(load("unet3d")),
            (std::vector<std::string>{"enc.0.weight", "enc.0.bias", "enc.1.weight", "enc.1.bias",
                                      "bottom.0.weight", "bottom.0.bias", "bottom.1.weight",
                                      "bottom.1.bias", "up.weight", "up.bias", "dec.0.weight",
                                      "dec.0.bias", "out.weight", "out.bias"}));
}

// The loss takes over the final Sigmoid (dice+bce) or Softmax (cross-entropy): the model's
// output is the tensor before it, and the layer is gone.
TEST(OnnxModels, LossTakesOverTheFinalActivation) {
  const graph::Model plain = load("unet3d", "mse");
  const graph::Model dice = load("unet3d", "dice+bce");
  EXPECT_EQ(dice.layers.size() + 1, plain.layers.size());
  EXPECT_EQ(plain.output, "output");
  EXPECT_EQ(dice.output, plain.layers[plain.layers.size() - 2].outputs[0]);
  EXPECT_EQ(dice.metric_name, "dice");
  const graph::Model keras = load("keras", "cross-entropy");
  EXPECT_EQ(keras.output, "logits");
  EXPECT_EQ(keras.metric_name, "accuracy");
  // The loss on the scores equals the loss PyTorch computes on the probabilities.
  auto data = testing::load_pt("unet3d_forward.pt");
  const torch::Tensor logits = testing::run_forward(dice, data.at("input"), true);
  const torch::Tensor p = data.at("train");
  const torch::Tensor t = (p > 0.5).to(torch::kFloat32);
  const double want =
      (1 - ((2 * (p * t).flatten(1).sum(1) + 1) / (p.flatten(1).sum(1) + t.flatten(1).sum(1) + 1)))
          .mean()
          .item<double>() +
      torch::binary_cross_entropy(p, t).item<double>();
  EXPECT_NEAR(dice.loss(logits, t).item<double>(), want, 1e-5);
}

// FLOPs per sample (for reports, --partition fit and the plan's forecast) come from the shapes
// ONNX's shape inference gives: 2 x weights x output positions for a convolution, 2 x weights
// x input positions for a transposed one, 2 x K x N for a Gemm.
TEST(OnnxModels, FlopsFromInferredShapes) {
  const graph::Model unet = load("unet3d");
  std::map<std::string, double> flops;
  for (const auto& layer : unet.layers) flops[layer.name] = layer.forward_flops_per_sample;
  EXPECT_EQ(flops.at("/enc/enc.0/Conv"), 2.0 * (4 * 1 * 27) * (8 * 8 * 8));
  EXPECT_EQ(flops.at("/up/ConvTranspose"), 2.0 * (8 * 4 * 8) * (4 * 4 * 4));
  EXPECT_EQ(flops.at("/out/Conv"), 2.0 * (1 * 4) * (8 * 8 * 8));
  // The concatenation of the skip and the up-sampled tensor is no layer of its own: the
  // convolution after it takes both (onnx/load.cc).
  EXPECT_EQ(flops.count("/Concat"), 0u);
  const graph::Model mlp = load("mlp");
  EXPECT_EQ(mlp.layers[1].forward_flops_per_sample, 2.0 * 12 * 16);
}

// The U-Net's Concat folded into the Conv after it: under a workspace bound that convolution
// keeps the two parts and convolves each with its channels of the weight; without one (fp32) it
// convolves their concatenation, as the unfolded graph did. Both give the same output and
// gradients (to float32 rounding of the parts' sum).
TEST(OnnxModels, AFoldedConcatenationConvolvesAsItsConcatenation) {
  auto run = [](int64_t bound) {
    const graph::Model m = load("unet3d");
    torch::manual_seed(5);
    const torch::Tensor x = torch::randn({2, 1, 8, 8, 8});
    std::map<std::string, torch::Tensor> env{{m.input, x}};
    for (size_t i = 0; i < m.layers.size(); ++i) {
      graph::CallContext call;
      call.layer = static_cast<int>(i);
      call.training = true;
      call.workspace_bound = bound;
      graph::ScopedCall scoped(call);
      graph::Tensors in;
      for (const auto& name : m.layers[i].inputs) in.push_back(env.at(name));
      const graph::Tensors out = m.layers[i].forward(in);
      for (size_t k = 0; k < out.size(); ++k) env[m.layers[i].outputs[k]] = out[k];
    }
    const torch::Tensor y = env.at(m.output);
    y.pow(2).sum().backward();
    std::vector<torch::Tensor> got{y.detach()};
    for (const auto& layer : m.layers)
      for (const auto& p : graph::named_parameters(layer)) got.push_back(p.second.grad());
    return got;
  };
  const auto whole = run(0), by_parts = run(1);
  ASSERT_EQ(whole.size(), by_parts.size());
  // Absolute 1e-6 too: the gradients of the biases before an InstanceNormalization are zero but
  // for rounding (the normalization removes a constant per channel).
  for (size_t i = 0; i < whole.size(); ++i)
    EXPECT_TRUE(torch::allclose(by_parts[i], whole[i], 1e-5, 1e-6)) << "tensor " << i;
}

// The graph's declared input, without its batch axis, is the model's input shape; a Keras
// graph's channels-last input is fed channels-first, after its Transpose, which tandem takes
// over: MNIST's [B,1,28,28] as they come. Symbolic axes take any size.
TEST(OnnxModels, InputShapeIsTheGraphsDeclaredOne) {
  const graph::Model keras = load("keras");
  EXPECT_EQ(keras.input_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(keras.input, "conv_in");
  EXPECT_EQ(graph::fit_input(keras, torch::zeros({2, 1, 28, 28})).sizes(),
            (std::vector<int64_t>{2, 1, 28, 28}));
  const graph::Model unet = load("unet3d");
  EXPECT_EQ(unet.input_shape, (std::vector<int64_t>{1, 8, 8, 8}));
  EXPECT_THROW(graph::fit_input(unet, torch::zeros({2, 1, 8, 8, 4})), Error);
}

// Batch normalization over micro-batches: each normalized by its own statistics; the running
// statistics gathered over the whole batch equal those of one micro-batch (one device), and
// recomputation does not count a micro-batch twice. Tolerance 1e-5: the batch's mean and
// variance are combined from per-micro-batch ones in float64 (exact up to the float32
// statistics of each part).
TEST(OnnxModels, BatchNormRunningStatisticsCoverTheWholeBatch) {
  auto stats = [](int microbatches, bool recompute) {
    runtime::PipelineOptions o;
    o.devices = parse_devices("2", 1);
    o.microbatches = microbatches;
    o.recompute = recompute;
    graph::Model m = load("cnn_bn", "cross-entropy");
    runtime::Pipeline p(std::move(m), graph::partition_by_parameters(load("cnn_bn"), 2), o);
    auto data = testing::load_pt("cnn_bn_batches.pt");
    for (int step = 0; step < 2; ++step) {
      p.forward_backward(data.at(fmt::format("input/{}", step)),
                         data.at(fmt::format("target/{}", step)));
    }
    std::map<std::string, torch::Tensor> out;
    for (const auto& layer : p.model().layers)
      for (const auto& [n, b] : graph::named_buffers(layer)) out[n] = b.clone();
    return out;
  };
  const auto one = stats(1, false);
  ASSERT_EQ(one.at("bn.num_batches_tracked").item<int64_t>(), 2);
  for (const auto& [microbatches, recompute] : {std::pair{3, false}, std::pair{3, true}}) {
    const auto split = stats(microbatches, recompute);
    for (const char* name : {"bn.running_mean", "bn.running_var"}) {
      EXPECT_LT(testing::relative_difference(split.at(name), one.at(name)), 1e-5)
          << name << " with " << microbatches << " micro-batches, recompute " << recompute;
    }
    EXPECT_EQ(split.at("bn.num_batches_tracked").item<int64_t>(), 2);
  }
  // The initial statistics moved: a running mean of zeros updated by non-zero batch means.
  EXPECT_GT(one.at("bn.running_mean").abs().max().item<double>(), 0);
}

}  // namespace
}  // namespace tandem
