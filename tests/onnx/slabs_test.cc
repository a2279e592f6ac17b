// ONNX graphs under a spatial split: which graphs a split can cut, at which slab sizes, and
// that a cut graph's loss, gradients and metric equal one device's on whole samples.
//
// Tolerance: as the built-in models' spatial tests (tests/spatial), 3e-5 of the reference
// gradient's largest magnitude: on slabs a weight gradient and the instance norm's statistics
// are summed per slab, then over the slabs. A halo sent to the wrong neighbour, a statistic of
// one slab alone or a slab counted twice moves a gradient by the order of 1/slabs.
#include "onnx_test_util.h"
#include "tandem/graph/partition.h"
#include "tandem/onnx/load.h"
#include "tandem/runtime/pipeline.h"

namespace tandem {
namespace {

constexpr double kRelTol = 3e-5;

graph::Model load_slab_case(const std::string& name, const std::string& loss = "mse") {
  onnx::LoadOptions o;
  o.loss = loss;
  return onnx::load(testing::fixture("slabs/" + name + ".onnx"), o);
}

// Why a split cannot cut slabs/<name>.onnx ("" when it can).
std::string slab_refusal(const std::string& name) { return load_slab_case(name).slab_refusal; }

TEST(OnnxSlabs, GraphsThatKeepToTheSlabsCanBeCut) {
  for (const char* name : {"conv_same", "conv_auto_same", "resize_linear_plane", "transpose_plane",
                           "pad_plane", "add_per_channel", "reshape_planes_kept"}) {
    const graph::Model m = load_slab_case(name);
    EXPECT_EQ(m.slab_refusal, "") << name;
    EXPECT_EQ(m.slab_dim, 2) << name;
    EXPECT_EQ(m.slab_multiple, 1) << name;
  }
}

TEST(OnnxSlabs, PoolingAndWideHalosSetTheSlabMultiple) {
  // A window of kernel = stride 2 then nearest up-sampling by 2: slabs of an even count.
  EXPECT_EQ(load_slab_case("conv_blocks_then_nearest").slab_multiple, 2);
  EXPECT_EQ(load_slab_case("segmentation", "cross-entropy").slab_multiple, 2);
  // A 5-plane kernel takes 2 planes from each neighbour: slabs of at least 2.
  EXPECT_EQ(load_slab_case("conv_5_same").slab_multiple, 2);
}

// The depth moved to the last axis (as tf2onnx writes a Keras layer: channels-last Concat and
// bias between two Transposes) and back before a convolution: followed there and back.
TEST(OnnxSlabs, TheDepthIsFollowedThroughTransposes) {
  const graph::Model m = load_slab_case("transpose_there_and_back");
  EXPECT_EQ(m.slab_refusal, "");
  EXPECT_EQ(m.slab_dim, 2);
  EXPECT_EQ(m.slab_multiple, 1);
}

TEST(OnnxSlabs, GraphsThatReachAcrossSlabsAreRefusedNamingNodeAndReason) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"conv_strided_padded",
       "ONNX node 'n' (Conv) cannot run on slabs: along the depth its window has kernel 3, "
       "stride 2, dilation 1, pads 1 and 1: on slabs a strided convolution needs kernel = "
       "stride and no padding"},
      {"conv_valid",
       "(Conv) cannot run on slabs: along the depth its window has kernel 3, "
       "stride 1, dilation 1, pads 0 and 0: on slabs a stride-1 convolution needs "
       "\"same\" padding"},
      {"pool_overlapping",
       "(MaxPool) cannot run on slabs: along the depth its window has "
       "kernel 3, stride 2"},
      {"resize_linear_depth",
       "(Resize) cannot run on slabs: it interpolates linearly along "
       "the depth axis"},
      {"resize_sizes", "(Resize) cannot run on slabs: it gives output sizes"},
      {"concat_depth", "(Concat) cannot run on slabs: it concatenates along the depth axis"},
      {"softmax_depth", "(Softmax) cannot run on slabs: it normalizes over the depth axis"},
      {"transpose_depth",
       "the graph output 'y' holds the depth on axis 3, where the target's is on axis 2"},
      {"conv_on_moved_depth",
       "ONNX node 'n' (Conv) cannot run on slabs: its input holds the depth on axis 3 (a "
       "Transpose or Reshape before it moved it), but on slabs this operator needs its input "
       "as [B,C,D,...], the depth on axis 2"},
      {"reshape_depth_merged",
       "ONNX node 'n' (Reshape) cannot run on slabs: its shape [0,0,-1] merges the depth (axis "
       "2 of [-1,2,8,4,4]) with other axes or splits it"},
      {"pad_depth", "(Pad) cannot run on slabs: pads [0,0,1,0,0,0,0,1,0,0] pad the depth axis"},
      {"add_per_plane",
       "(Add) cannot run on slabs: its operand 'ramp' [8,1,1] varies along "
       "the depth axis"},
      {"global_pool", "(GlobalAveragePool) cannot run on slabs: it averages the whole volume"},
      {"batch_norm",
       "(BatchNormalization) cannot run on slabs: its statistics run over the "
       "batch and the whole volume; on slabs use InstanceNormalization"},
      {"flatten", "(Flatten) cannot run on slabs: it reshapes or mixes the depth axis"},
  };
  for (const auto& [name, why] : cases) {
    const graph::Model m = load_slab_case(name);
    EXPECT_NE(m.slab_refusal.find(why), std::string::npos) << name << ": " << m.slab_refusal;
    EXPECT_EQ(m.slab_dim, -1) << name;
  }
}

TEST(OnnxSlabs, AnInputWithoutAVolumeIsRefused) {
  const std::string why = slab_refusal("vector_input");
  EXPECT_NE(why.find("the graph input 'x' has rank 2: no volume to cut"), std::string::npos) << why;
}

struct Data {
  torch::Tensor input, target;
};

struct SplitCase {
  std::string model;  // a fixture path under the fixtures folder
  std::string loss;
  int slabs;
  int stages;
  int microbatches;
};

void PrintTo(const SplitCase& c, std::ostream* os) {
  *os << fmt::format("{} ({}), {} slabs, {} stages, {} micro-batches", c.model, c.loss, c.slabs,
                     c.stages, c.microbatches);
}

graph::Model load_model(const SplitCase& c) {
  onnx::LoadOptions o;
  o.loss = c.loss;
  return onnx::load(testing::fixture(c.model), o);
}

// Three samples of the model's input, targets of its loss.
Data make_data(const graph::Model& m, const std::string& loss) {
  torch::manual_seed(7);
  std::vector<int64_t> shape = {3};
  shape.insert(shape.end(), m.input_shape.begin(), m.input_shape.end());
  Data d;
  d.input = torch::randn(shape);
  shape[1] = 1;
  d.target = loss == "cross-entropy" ? torch::randint(0, 3, shape).to(torch::kFloat32)
                                     : torch::rand(shape).gt(0.6).to(torch::kFloat32);
  return d;
}

runtime::Pipeline make_pipeline(const SplitCase& c, int slabs, int stages, int microbatches) {
  graph::Model m = load_model(c);
  runtime::PipelineOptions o;
  o.devices = parse_devices(std::to_string(slabs * stages), 1);
  o.slabs = slabs;
  o.slab_extent = m.input_shape.at(1);
  o.schedule = "1f1b";
  o.microbatches = microbatches;
  const graph::Partition part = graph::partition_by_parameters(m, stages);
  return runtime::Pipeline(std::move(m), part, o);
}

class OnnxSplit : public ::testing::TestWithParam<SplitCase> {};

TEST_P(OnnxSplit, LossGradientsAndMetricMatchOneDevice) {
  const SplitCase c = GetParam();
  const Data d = make_data(load_model(c), c.loss);
  runtime::Pipeline whole = make_pipeline(c, 1, 1, c.microbatches);
  const runtime::StepStats want = whole.forward_backward(d.input, d.target);
  const double want_metric = whole.evaluate(d.input, d.target).metric_sum;
  std::map<std::string, torch::Tensor> want_grads;
  for (auto& [name, t] : whole.named_parameters()) want_grads[name] = t.grad().clone();

  runtime::Pipeline split = make_pipeline(c, c.slabs, c.stages, c.microbatches);
  const runtime::StepStats got = split.forward_backward(d.input, d.target);
  EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::max(1.0, std::abs(want.loss)));
  const auto params = split.named_parameters();
  ASSERT_EQ(params.size(), want_grads.size());
  for (const auto& [name, t] : params) {
    ASSERT_TRUE(t.grad().defined()) << name << " has no gradient";
    const torch::Tensor& ref = want_grads.at(name);
    const double scale = ref.abs().max().item<double>();
    const double diff = (t.grad() - ref).abs().max().item<double>();
    EXPECT_LE(diff, kRelTol * scale + 1e-7)
        << name << " differs by " << diff << " (scale " << scale << ")";
  }
  EXPECT_NEAR(split.evaluate(d.input, d.target).metric_sum, want_metric, 1e-9);
}

// The PyTorch U-Net (instance norm, max pooling, transposed convolution, a skip; Dice + BCE
// with its Sigmoid taken into the loss) and a segmentation net (nearest up-sampling, a skip
// added, cross-entropy over three classes with its Softmax taken into the loss), 8 planes cut
// into 2 and 4 slabs (2 planes each: 1 after the pooling), alone and under 2 stages; and a
// grouped convolution dilated along the depth (halos of 2 planes) with uneven padding across
// the plane, then a 1x1x1 convolution, on 2 slabs; the channels-last Keras U-Net (its layout
// Transposes taken over, one level's concatenation on the last axis between Transposes) on 2
// slabs, alone and under 2 stages.
INSTANTIATE_TEST_SUITE_P(
    Fixtures, OnnxSplit,
    ::testing::Values(SplitCase{"unet3d.onnx", "dice+bce", 2, 1, 2},
                      SplitCase{"unet3d.onnx", "dice+bce", 4, 1, 1},
                      SplitCase{"unet3d.onnx", "dice+bce", 2, 2, 2},
                      SplitCase{"slabs/segmentation.onnx", "cross-entropy", 2, 1, 2},
                      SplitCase{"slabs/segmentation.onnx", "cross-entropy", 4, 2, 3},
                      SplitCase{"slabs/dilated.onnx", "cross-entropy", 2, 1, 2},
                      SplitCase{"slabs/dilated.onnx", "cross-entropy", 2, 2, 1},
                      SplitCase{"keras_unet3d.onnx", "dice+bce", 2, 1, 2},
                      SplitCase{"keras_unet3d.onnx", "dice+bce", 2, 2, 1}));

}  // namespace
}  // namespace tandem
