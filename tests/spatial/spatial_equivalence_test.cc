// A spatial split (every sample cut into depth slabs, one per device of a group) against the
// same model on one device on the full batch.
//
// Tolerance: the volume tests' kRelTol = 3e-5 of the reference gradient's largest magnitude
// (tests/models/volume_equivalence_test.cc says why). On slabs the sums that move are the same
// kind: a weight gradient is summed per slab, then over the slabs, where the reference sums it
// over the whole volume inside one convolution backward; a Dice or mean sum is added per slab,
// then over the group. A halo that went to the wrong neighbour, a missing halo gradient or a
// slab counted twice moves a gradient by the order of 1/slabs, far above it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../models/volume_models.h"
#include "tandem/common/check.h"
#include "tandem/graph/partition.h"
#include "tandem/runtime/pipeline.h"

namespace tandem {
namespace {

using namespace model_testing;

constexpr double kRelTol = 3e-5;

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << " has no gradient";
  const double scale = want.abs().max().item<double>();
  const double diff = (got.cpu() - want).abs().max().item<double>();
  EXPECT_LE(diff, kRelTol * scale + 1e-7)
      << what << " differs by " << diff << " (scale " << scale << ")";
}

enum class Net { kUnet2, kUnet3, kConv };

const char* net_name(Net n) {
  return n == Net::kUnet2 ? "unet2" : n == Net::kUnet3 ? "unet3" : "conv";
}

graph::Model make_net(Net n, bool bce = false) {
  switch (n) {
    case Net::kUnet2:
      return small_unet(2, 0.0, bce);
    case Net::kUnet3:
      return small_unet(3, 0.0, bce);
    case Net::kConv:
      return small_conv_stack();
  }
  return {};
}

int64_t side(Net n) { return n == Net::kConv ? 8 : 16; }

VolumeData make_data(Net n, int64_t batch) {
  return n == Net::kConv ? regression_data(batch, 8) : segmentation_data(batch, 16);
}

// Layers per stage (the volume tests' cuts: the U-Nets' skips cross the stages).
std::vector<int> balance(Net n, int stages) {
  if (stages == 1) return {n == Net::kUnet2 ? 9 : n == Net::kUnet3 ? 15 : 4};
  return n == Net::kUnet2   ? std::vector<int>{5, 4}
         : n == Net::kUnet3 ? std::vector<int>{8, 7}
                            : std::vector<int>{2, 2};
}

struct Case {
  Net net;
  int slabs;
  int stages;
  std::string schedule;
  int microbatches;
  bool recompute;
  // PipelineOptions::workspace_bound: 0 runs every pass over the whole slab; 1 byte, in chunks of
  // the fewest planes (two).
  int64_t workspace = 0;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << fmt::format("{}, {} slabs, {} stages, {}, {} micro-batches{}{}", net_name(c.net), c.slabs,
                     c.stages, c.schedule, c.microbatches, c.recompute ? ", recompute" : "",
                     c.workspace ? ", bounded workspace" : "");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return fmt::format("{}_x{}_s{}_{}_m{}{}{}", net_name(c.net), c.slabs, c.stages,
                     c.schedule == "zb-h1" ? "zbh1" : c.schedule, c.microbatches,
                     c.recompute ? "_recompute" : "", c.workspace ? "_bounded" : "");
}

constexpr int64_t kBatch = 5;  // 3 micro-batches: 2,2,1 (uneven)

runtime::Pipeline make_pipeline(const Case& c, bool bce = false) {
  runtime::PipelineOptions o;
  o.devices = cpu_devices(c.stages * c.slabs);
  o.slabs = c.slabs;
  o.slab_extent = side(c.net);
  o.schedule = c.schedule;
  o.microbatches = c.microbatches;
  o.recompute = c.recompute;
  o.workspace_bound = c.workspace;
  graph::Model m = make_net(c.net, bce);
  graph::Partition part = graph::partition_by_balance(m, balance(c.net, c.stages));
  return runtime::Pipeline(std::move(m), part, o);
}

class SpatialEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(SpatialEquivalence, GradientsAndLossMatchOneDeviceFullBatch) {
  const Case c = GetParam();
  VolumeData d = make_data(c.net, kBatch);
  auto want = reference_grads(make_net(c.net), d);
  graph::Model ref = make_net(c.net);
  const double want_loss = ref.loss(reference_forward(ref, d.input), d.target).item<double>();

  runtime::Pipeline p = make_pipeline(c);
  runtime::StepStats stats = p.forward_backward(d.input, d.target);
  EXPECT_NEAR(stats.loss, want_loss, 1e-6 * std::max(1.0, std::abs(want_loss)));
  EXPECT_EQ(stats.samples, kBatch);
  auto params = p.named_parameters();
  ASSERT_EQ(params.size(), want.size());
  for (auto& [name, t] : params) expect_close(t.grad(), want.at(name), name);
}

// Every model with 2, 3 and 4 slabs (uneven where the depth allows: conv 8 planes in 3 is
// 3,3,2; unet2 16 in 3 is 6,6,4; unet3 16 in 3 is 8,4,4), alone and under 2 stages, through
// GPipe, 1F1B and ZB-H1 (split backward), with 1 and 3 micro-batches and with recomputation.
std::vector<Case> matrix() {
  std::vector<Case> cases;
  const std::vector<std::string> schedules{"gpipe", "1f1b", "zb-h1"};
  int k = 0;
  for (Net n : {Net::kUnet2, Net::kUnet3, Net::kConv}) {
    for (int slabs : {2, 3, 4}) {
      for (int stages : {1, 2}) {
        cases.push_back({n, slabs, stages, schedules[k % 3], k % 2 ? 3 : 1, (k / 2) % 2 == 1});
        ++k;
      }
    }
    // Under a workspace bound (the passes in chunks of two planes): split backward over uneven
    // slabs, and recomputation under stages.
    cases.push_back({n, 3, 1, "zb-h1", 3, false, 1});
    cases.push_back({n, 2, 2, "1f1b", 1, true, 1});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Matrix, SpatialEquivalence, ::testing::ValuesIn(matrix()), case_name);

// Dice plus BCE (a mean over every voxel of the batch) and the hard Dice metric of an
// evaluation: the same numbers as one device.
TEST(SpatialEquivalence, BceLossAndDiceMetricMatchOneDevice) {
  VolumeData d = make_data(Net::kUnet3, kBatch);
  auto want = reference_grads(make_net(Net::kUnet3, /*bce=*/true), d);
  graph::Model ref = make_net(Net::kUnet3, true);
  double want_metric;
  {
    torch::NoGradGuard no_grad;
    want_metric =
        ref.metric(reference_forward(ref, d.input, 0, 0, 0, /*training=*/false), d.target);
  }
  runtime::Pipeline p = make_pipeline({Net::kUnet3, 3, 2, "1f1b", 3, false}, /*bce=*/true);
  p.forward_backward(d.input, d.target);
  for (auto& [name, t] : p.named_parameters()) expect_close(t.grad(), want.at(name), name);
  runtime::StepStats s = p.evaluate(d.input, d.target);
  EXPECT_EQ(s.samples, kBatch);
  EXPECT_NEAR(s.metric_sum, want_metric, 1e-9);
}

// The conv stack's metric (the mean squared error per sample, summed).
TEST(SpatialEquivalence, MseMetricMatchesOneDevice) {
  VolumeData d = make_data(Net::kConv, kBatch);
  graph::Model ref = make_net(Net::kConv);
  double want;
  {
    torch::NoGradGuard no_grad;
    want = ref.metric(reference_forward(ref, d.input, 0, 0, 0, false), d.target);
  }
  runtime::Pipeline p = make_pipeline({Net::kConv, 4, 1, "1f1b", 2, false});
  EXPECT_NEAR(p.evaluate(d.input, d.target).metric_sum, want, 1e-6 * std::abs(want));
}

// Three Adam steps: the slabs' copies of the weights stay one model (the group's first device
// steps the optimizer, the others take its weights before each step).
// Dropout on slabs: each slab draws its slice of the whole sample's mask (keyed per element in
// the whole sample's coordinates), so the split trains what one device trains on the full batch,
// with uneven slabs, micro-batches and recomputation (which redraws the same masks).
TEST(SpatialEquivalence, DropoutMasksAreSlicesOfTheWholeSamplesMasks) {
  for (int slabs : {2, 3}) {
    for (bool recompute : {false, true}) {
      VolumeData d = segmentation_data(kBatch, 16);
      auto want = reference_grads(small_unet(3, 0.3), d, {}, /*seed=*/7);
      runtime::PipelineOptions o;
      o.devices = cpu_devices(2 * slabs);
      o.slabs = slabs;
      o.slab_extent = 16;
      o.schedule = "1f1b";
      o.microbatches = 3;
      o.recompute = recompute;
      o.seed = 7;
      graph::Model m = small_unet(3, 0.3);
      auto part = graph::partition_by_balance(m, {8, 8});  // the dropout layer adds one
      runtime::Pipeline p(std::move(m), part, o);
      p.forward_backward(d.input, d.target);
      for (auto& [name, t] : p.named_parameters())
        expect_close(t.grad(), want.at(name),
                     fmt::format("{} ({} slabs{})", name, slabs, recompute ? ", recompute" : ""));
    }
  }
}

TEST(SpatialEquivalence, ThreeAdamStepsMatchOneDevice) {
  VolumeData d = make_data(Net::kUnet2, kBatch);
  graph::Model ref = make_net(Net::kUnet2);
  std::vector<torch::Tensor> ref_params;
  for (auto& [name, t] : all_parameters(ref)) ref_params.push_back(t);
  torch::optim::Adam ref_opt(ref_params, torch::optim::AdamOptions(1e-2));
  runtime::Pipeline p = make_pipeline({Net::kUnet2, 2, 2, "1f1b", 3, false});
  p.set_optimizer([](std::vector<torch::Tensor> ps) {
    return std::make_unique<torch::optim::Adam>(ps, torch::optim::AdamOptions(1e-2));
  });
  for (int step = 0; step < 3; ++step) {
    ref_opt.zero_grad();
    ref.loss(reference_forward(ref, d.input), d.target).backward();
    ref_opt.step();
    p.forward_backward(d.input, d.target);
    p.optimizer_step();
  }
  auto want = all_parameters(ref);
  auto got = p.named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    // Adam divides by the root of the second moment: a gradient's relative error carries
    // over to the update, of size lr = 1e-2, so the weights agree to about 1e-2 * kRelTol.
    const double diff = (got[k].second - want[k].second).abs().max().item<double>();
    EXPECT_LE(diff, 1e-5) << got[k].first;
  }
  // And the second slab's copy runs with the same weights: an evaluation after the steps
  // gives the reference's Dice.
  double want_metric;
  {
    torch::NoGradGuard no_grad;
    want_metric = ref.metric(reference_forward(ref, d.input, 0, 0, 0, false), d.target);
  }
  EXPECT_NEAR(p.evaluate(d.input, d.target).metric_sum, want_metric, 1e-9);
}

// Where each device's planes are, in the placement table; and that a slab's forward and
// backward ran on its own device.
TEST(SpatialPlacement, TableShowsEachDevicesPlanesAndTheLogEachSlabsDevice) {
  runtime::PipelineOptions o;
  o.devices = cpu_devices(4);
  o.slabs = 2;
  o.slab_extent = 16;
  o.log_placement = true;
  graph::Model m = make_net(Net::kUnet2);
  auto part = graph::partition_by_balance(m, {5, 4});
  runtime::Pipeline p(std::move(m), part, o);
  const std::string table = p.placement_table();
  EXPECT_NE(table.find("cpu:0      enc0.conv0..bottom.conv1 (5)"), std::string::npos) << table;
  EXPECT_NE(table.find("planes 0:8 of 16"), std::string::npos) << table;
  EXPECT_NE(table.find("planes 8:16 of 16"), std::string::npos) << table;
  VolumeData d = make_data(Net::kUnet2, 2);
  p.forward_backward(d.input, d.target);
  const std::string log = p.placement_log_table();
  EXPECT_NE(log.find("enc0.conv0               0      cpu:0,cpu:1      cpu:0,cpu:1"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("final                    1      cpu:2,cpu:3      cpu:2,cpu:3"),
            std::string::npos)
      << log;
}

std::string construction_error(runtime::PipelineOptions o, graph::Model m) {
  try {
    auto part = graph::partition_by_balance(m, {static_cast<int>(m.layers.size())});
    runtime::Pipeline p(std::move(m), part, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SpatialErrors, RefusesModelsWithoutAVolumeAndDepthsThatDoNotCut) {
  runtime::PipelineOptions o;
  o.devices = cpu_devices(2);
  o.slabs = 2;
  o.slab_extent = 28;
  graph::Model mlp;
  mlp.name = "mlp";
  mlp.layers.push_back(graph::make_layer("fc", torch::nn::Linear(4, 2), "input", "output"));
  mlp.loss = [](const torch::Tensor& a, const torch::Tensor&) { return a.sum(); };
  EXPECT_NE(construction_error(o, mlp).find("model 'mlp' has no volume"), std::string::npos);
  o.devices = cpu_devices(4);
  o.slabs = 4;
  o.slab_extent = 8;
  EXPECT_EQ(construction_error(o, make_net(Net::kUnet3)),
            "4 slabs of at least 4 planes need a depth of at least 16, not 8: use a depth of at "
            "least 16 or at most 2 slabs");
  o.devices = cpu_devices(3);
  EXPECT_NE(construction_error(o, make_net(Net::kUnet3)).find("3 devices cannot form groups of 4"),
            std::string::npos);
}

// A step whose volume is not the one the split was made for is refused before it runs.
TEST(SpatialErrors, RefusesAnInputOfAnotherDepth) {
  runtime::Pipeline p = make_pipeline({Net::kConv, 2, 1, "1f1b", 1, false});
  VolumeData d = regression_data(2, 6);
  try {
    p.forward_backward(d.input, d.target);
    FAIL() << "a depth of 6 ran on a split made for 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuts 8 planes along dimension 2 into 2 slabs"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
