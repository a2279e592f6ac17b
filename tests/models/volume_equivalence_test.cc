// The volumetric models pipelined against the same model on one device on the full batch.
//
// Tolerance: fp32, kRelTol = 3e-5 of the reference gradient's largest magnitude, plus 1e-7
// for gradients that are all ~0. With several micro-batches a weight gradient is summed per
// micro-batch and then across micro-batches, where the reference sums over the whole batch
// inside one convolution backward: the same terms in another order. A 3x3x3 weight gradient
// at level 0 sums n = B * S^3 = 6 * 16^3 ~ 25,000 products; reordering such a sum moves it
// by about sqrt(n) * 2^-24 ~ 1e-5 of the sum of the magnitudes (rounding errors add like a
// random walk; the worst case n * 2^-24 ~ 1.5e-3 is never approached), and the sigmoid, the
// per-sample Dice sums and up to 5 convolutions backward in sequence each add such a step.
// Measured here: at most 3.5e-6 over all cases, so 3e-5 leaves a factor of 10 for other
// kernels (LibTorch 2.x, other BLAS) without hiding a wrong micro-batch weight (a missing or
// doubled micro-batch of 6 samples moves the gradient by the order of 1/6).
//
// With one micro-batch the split into stages changes no arithmetic: each layer runs the
// reference's operations on the same values, and a skip's gradient is the sum of its two
// consumers' gradients, which is the same in either order. Those cases must match bit for
// bit; the reference then runs on one intra-op thread like each stage, so the claim does not
// depend on how a machine's cores split a convolution's reductions.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/graph/partition.h"
#include "tandem/runtime/pipeline.h"
#include "volume_models.h"

namespace tandem {
namespace {

using namespace model_testing;

constexpr double kRelTol = 3e-5;

// Runs the calling thread's intra-op work on `n` threads for its lifetime.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : previous_(at::get_num_threads()) { at::set_num_threads(n); }
  ~ScopedThreads() { at::set_num_threads(previous_); }

 private:
  int previous_;
};

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << " has no gradient";
  const double scale = want.abs().max().item<double>();
  const double diff = (got.cpu() - want).abs().max().item<double>();
  EXPECT_LE(diff, kRelTol * scale + 1e-7)
      << what << " differs by " << diff << " (scale " << scale << ")";
}

enum class Net { kUnet2, kUnet3, kConv };

const char* net_name(Net n) {
  switch (n) {
    case Net::kUnet2:
      return "unet2";
    case Net::kUnet3:
      return "unet3";
    case Net::kConv:
      return "conv";
  }
  return "?";
}

graph::Model make_net(Net n) {
  switch (n) {
    case Net::kUnet2:
      return small_unet(2);
    case Net::kUnet3:
      return small_unet(3);
    case Net::kConv:
      return small_conv_stack();
  }
  return {};
}

VolumeData make_data(Net n, int64_t batch) {
  return n == Net::kConv ? regression_data(batch, 8) : segmentation_data(batch, 16);
}

// Layers per stage. The U-Net cuts put the skips across stages:
//   unet2 (9 layers: enc0.conv0 enc0.conv1 pool0 bottom.conv0 bottom.conv1 up0 dec0.conv0
//          dec0.conv1 final)
//     2 stages 5,4: encoder | decoder, skip0 0->1
//     3 stages 3,3,3: skip0 0->2 (non-adjacent)
//     4 stages 2,2,2,3: skip0 0->1 (pool0) and 0->3 (dec0.conv0)
//   unet3 (15 layers: enc0 x2, pool0, enc1 x2, pool1, bottom x2, up1, dec1 x2, up0, dec0 x2,
//          final)
//     2 stages 8,7: encoder | decoder, skip0 and skip1 0->1
//     3 stages 5,4,6: skip0 0->2, skip1 0->1 (pool1) and 0->2 (dec1.conv0)
//     4 stages 3,4,4,4: skip0 0->3, skip1 1->2
std::vector<int> balance(Net n, int stages) {
  static const std::map<std::pair<Net, int>, std::vector<int>> table = {
      {{Net::kUnet2, 1}, {9}},       {{Net::kUnet2, 2}, {5, 4}},
      {{Net::kUnet2, 3}, {3, 3, 3}}, {{Net::kUnet2, 4}, {2, 2, 2, 3}},
      {{Net::kUnet3, 1}, {15}},      {{Net::kUnet3, 2}, {8, 7}},
      {{Net::kUnet3, 3}, {5, 4, 6}}, {{Net::kUnet3, 4}, {3, 4, 4, 4}},
      {{Net::kConv, 1}, {4}},        {{Net::kConv, 2}, {2, 2}},
      {{Net::kConv, 3}, {1, 1, 2}},  {{Net::kConv, 4}, {1, 1, 1, 1}},
  };
  return table.at({n, stages});
}

struct Case {
  Net net;
  std::string schedule;
  int stages;
  int microbatches;
  bool recompute;
};

constexpr int64_t kBatch = 6;  // 4 micro-batches of 6: 2,2,1,1 (uneven)

// How gtest and ctest name a case's parameter (instead of its raw bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << fmt::format("{}, {}, {} stages, {} micro-batches{}", net_name(c.net), c.schedule, c.stages,
                     c.microbatches, c.recompute ? ", recompute" : "");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return fmt::format("{}_{}_s{}_m{}{}", net_name(c.net), c.schedule, c.stages, c.microbatches,
                     c.recompute ? "_recompute" : "");
}

class VolumeEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(VolumeEquivalence, GradientsMatchOneDeviceFullBatch) {
  const Case c = GetParam();
  VolumeData d = make_data(c.net, kBatch);
  std::map<std::string, torch::Tensor> want;
  double want_loss;
  {
    ScopedThreads one(1);
    want = reference_grads(make_net(c.net), d);
    graph::Model ref = make_net(c.net);
    want_loss = ref.loss(reference_forward(ref, d.input), d.target).item<double>();
  }

  runtime::PipelineOptions o;
  o.devices = cpu_devices(c.stages);
  o.schedule = c.schedule;
  o.microbatches = c.microbatches;
  o.recompute = c.recompute;
  graph::Model m = make_net(c.net);
  graph::Partition part = graph::partition_by_balance(m, balance(c.net, c.stages));
  runtime::Pipeline p(std::move(m), part, o);
  runtime::StepStats stats = p.forward_backward(d.input, d.target);
  EXPECT_NEAR(stats.loss, want_loss, 1e-6 * std::max(1.0, std::abs(want_loss)));
  auto params = p.named_parameters();
  ASSERT_EQ(params.size(), want.size());
  for (auto& [name, t] : params) {
    if (c.microbatches == 1) {
      EXPECT_TRUE(torch::equal(t.grad(), want.at(name))) << name << " is not bitwise equal";
    } else {
      expect_close(t.grad(), want.at(name), name);
    }
  }
}

// Every model x schedule x stage count, each with micro-batches 1, 2 and 4 (uneven: 2,2,1,1);
// recompute alternates so that every (model, schedule) pair and every stage count sees both.
std::vector<Case> matrix() {
  std::vector<Case> cases;
  int k = 0;
  for (Net n : {Net::kUnet2, Net::kUnet3, Net::kConv}) {
    for (std::string s : {"sequential", "gpipe", "1f1b"}) {
      for (int stages = 1; stages <= 4; ++stages) {
        for (int m : {1, 2, 4}) cases.push_back({n, s, stages, m, (k++ % 2) == 1});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Matrix, VolumeEquivalence, ::testing::ValuesIn(matrix()), case_name);

// The partitions above put the skips where their comments say.
TEST(VolumePartitions, SkipsCrossToTheStagesThatReadThem) {
  auto crossing = [](const graph::Flow& f, int from, const std::string& tensor) {
    std::vector<int> to;
    for (const auto& c : f.outputs[from]) {
      if (c.tensor == tensor) to.push_back(c.to_stage);
    }
    return to;
  };
  {
    graph::Model m = small_unet(3);
    graph::Flow f = graph::analyze(m, graph::partition_by_balance(m, balance(Net::kUnet3, 4)));
    EXPECT_EQ(crossing(f, 0, "skip0"), std::vector<int>{3});
    EXPECT_EQ(crossing(f, 1, "skip1"), std::vector<int>{2});
    f = graph::analyze(m, graph::partition_by_balance(m, balance(Net::kUnet3, 2)));
    EXPECT_EQ(crossing(f, 0, "skip0"), std::vector<int>{1});
    EXPECT_EQ(crossing(f, 0, "skip1"), std::vector<int>{1});
    f = graph::analyze(m, graph::partition_by_balance(m, balance(Net::kUnet3, 3)));
    EXPECT_EQ(crossing(f, 0, "skip0"), std::vector<int>{2});
    EXPECT_EQ(crossing(f, 0, "skip1"), (std::vector<int>{1, 2}));  // pool1 and dec1.conv0
  }
  {
    graph::Model m = small_unet(2);
    graph::Flow f = graph::analyze(m, graph::partition_by_balance(m, balance(Net::kUnet2, 3)));
    EXPECT_EQ(crossing(f, 0, "skip0"), std::vector<int>{2});
    f = graph::analyze(m, graph::partition_by_balance(m, balance(Net::kUnet2, 4)));
    EXPECT_EQ(crossing(f, 0, "skip0"), (std::vector<int>{1, 3}));  // pool0 and dec0.conv0
  }
}

// Two stages on one device and two on another, the skips crossing both ways between them.
TEST(VolumeEquivalence, StagesSharingDevicesWithSkips) {
  VolumeData d = make_data(Net::kUnet3, 5);
  auto want = reference_grads(make_net(Net::kUnet3), d);
  runtime::PipelineOptions o;
  o.devices = cpu_devices(2);
  o.stage_device = {0, 1, 0, 1};
  o.schedule = "1f1b";
  o.microbatches = 3;  // 2,2,1
  graph::Model m = make_net(Net::kUnet3);
  auto part = graph::partition_by_balance(m, balance(Net::kUnet3, 4));
  runtime::Pipeline p(std::move(m), part, o);
  p.forward_backward(d.input, d.target);
  for (auto& [name, t] : p.named_parameters()) expect_close(t.grad(), want.at(name), name);
}

// Dropout and BCE: every sample's mask is keyed by (seed, step, layer) and its place in the
// batch, so the pipeline's micro-batches (2, 2, 1), stored or recomputed, draw the masks of one
// device on the whole batch in one call. kRelTol as above: the micro-batches only reorder
// sums.
class DropoutEquivalence : public ::testing::TestWithParam<bool> {};

TEST_P(DropoutEquivalence, MatchesOneDeviceOnTheWholeBatch) {
  const bool recompute = GetParam();
  auto make = [] { return small_unet(3, /*dropout=*/0.3, /*bce=*/true); };
  VolumeData d = make_data(Net::kUnet3, 5);
  auto want = reference_grads(make(), d, {}, /*seed=*/9);
  auto other_masks = reference_grads(make(), d, {}, /*seed=*/10);

  runtime::PipelineOptions o;
  o.devices = cpu_devices(3);
  o.schedule = "1f1b";
  o.microbatches = 3;
  o.seed = 9;
  o.recompute = recompute;
  graph::Model m = make();
  ASSERT_GE(m.find_layer("bottom.dropout"), 0);
  auto part = graph::partition_by_balance(m, {5, 5, 6});
  runtime::Pipeline p(std::move(m), part, o);
  p.forward_backward(d.input, d.target);
  double max_other = 0;
  for (auto& [name, t] : p.named_parameters()) {
    expect_close(t.grad(), want.at(name), name);
    max_other = std::max(max_other, relative_error(t.grad(), other_masks.at(name)));
  }
  // The masks matter: other masks give clearly other gradients.
  EXPECT_GT(max_other, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Recompute, DropoutEquivalence, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "recompute" : "stored";
                         });

// Evaluation through the pipeline gives the models' metrics summed over the samples.
TEST(VolumeEquivalence, EvaluateSumsTheMetricOverSamples) {
  VolumeData d = make_data(Net::kUnet2, 5);
  graph::Model ref = make_net(Net::kUnet2);
  double want;
  {
    torch::NoGradGuard no_grad;
    want = ref.metric(reference_forward(ref, d.input, 0, 0, 0, /*training=*/false), d.target);
  }
  runtime::PipelineOptions o;
  o.devices = cpu_devices(2);
  o.microbatches = 2;
  graph::Model m = make_net(Net::kUnet2);
  auto part = graph::partition_by_balance(m, balance(Net::kUnet2, 2));
  runtime::Pipeline p(std::move(m), part, o);
  runtime::StepStats s = p.evaluate(d.input, d.target);
  EXPECT_EQ(s.samples, 5);
  EXPECT_NEAR(s.metric_sum, want, 1e-9);
}

}  // namespace
}  // namespace tandem
