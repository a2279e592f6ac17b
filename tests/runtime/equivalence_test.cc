// Pipelined runs against the same model on one device on the full batch.
//
// Tolerance: fp32. A pipelined step sums each weight gradient over micro-batches, where the
// reference sums over the whole batch inside one GEMM: the same terms in another order. With
// B <= 50 terms of one sign pattern the reordering error is below B * 2^-24 ~ 3e-6 of the
// largest partial sum, so we allow 1e-5 of the tensor's largest magnitude (plus 1e-7 for
// gradients that are all ~0). One stage with one micro-batch runs the reference's exact
// operations, and must match bit for bit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "tandem/runtime/pipeline.h"
#include "test_models.h"

namespace tandem {
namespace {

using testing::all_parameters;
using testing::reference_forward;

struct Data {
  torch::Tensor input, target;
};

Data make_data(int64_t batch, int64_t features, int64_t classes, uint64_t seed = 3) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  return {torch::randn({batch, features}, gen), torch::randint(classes, {batch}, gen)};
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << " has no gradient";
  const double scale = want.abs().max().item<double>();
  const double diff = (got.cpu() - want).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5 * scale + 1e-7)
      << what << " differs by " << diff << " (scale " << scale << ")";
}

std::vector<DeviceSpec> cpu_devices(int n) { return parse_devices(std::to_string(n), 1); }

// The reference gradients of the model built by `make`, on the full batch.
std::map<std::string, torch::Tensor> reference_grads(const std::function<graph::Model()>& make,
                                                     const Data& d) {
  graph::Model m = make();
  torch::Tensor loss = m.loss(reference_forward(m, d.input), d.target);
  loss.backward();
  std::map<std::string, torch::Tensor> g;
  for (auto& [name, p] : all_parameters(m)) g[name] = p.grad().clone();
  return g;
}

struct Case {
  std::string schedule;
  int stages;
  int microbatches;
  int batch;
  int virtual_stages = 1;  // interleaved: devices = stages / virtual_stages
};

// How gtest and ctest name a case's parameter (instead of its raw bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << fmt::format("{}, {} stages, {} micro-batches, batch {}, {} virtual", c.schedule, c.stages,
                     c.microbatches, c.batch, c.virtual_stages);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.schedule;
  for (char& ch : s)
    if (ch == '-') ch = '_';
  return fmt::format("{}_s{}_m{}_b{}_v{}", s, info.param.stages, info.param.microbatches,
                     info.param.batch, info.param.virtual_stages);
}

class Equivalence : public ::testing::TestWithParam<Case> {};

TEST_P(Equivalence, GradientsAndAdamStepsMatchOneDevice) {
  const Case c = GetParam();
  auto make = [] { return testing::small_mlp(); };
  Data d = make_data(c.batch, 12, 5);
  auto want = reference_grads(make, d);

  runtime::PipelineOptions o;
  o.devices = cpu_devices(c.stages / c.virtual_stages);
  o.schedule = c.schedule;
  o.microbatches = c.microbatches;
  o.virtual_stages = c.schedule == "interleaved" ? c.virtual_stages : 1;
  graph::Model m = make();
  graph::Partition part = graph::partition_by_parameters(m, c.stages);
  runtime::Pipeline p(std::move(m), part, o);
  p.forward_backward(d.input, d.target);
  auto params = p.named_parameters();
  ASSERT_EQ(params.size(), want.size());
  const bool exact = c.stages == 1 && c.microbatches == 1;
  for (auto& [name, t] : params) {
    if (exact) {
      EXPECT_TRUE(torch::equal(t.grad(), want.at(name))) << name << " is not bitwise equal";
    } else {
      expect_close(t.grad(), want.at(name), name);
    }
  }

  // Three Adam steps, pipelined and on one device. Adam divides a uniform scale out of its
  // steps (every gradient x8 moves the weights by no more than the reordering tolerance), so
  // each step's gradients are compared before the optimizer sees them, and the parameters
  // after.
  graph::Model ref = make();
  auto ref_params = all_parameters(ref);
  std::vector<torch::Tensor> ref_list;
  for (auto& kv : ref_params) ref_list.push_back(kv.second);
  torch::optim::Adam ref_opt(ref_list, torch::optim::AdamOptions(1e-2));
  p.set_optimizer([](std::vector<torch::Tensor> ps) {
    return std::make_unique<torch::optim::Adam>(ps, torch::optim::AdamOptions(1e-2));
  });
  for (int step = 0; step < 3; ++step) {
    Data ds = make_data(c.batch, 12, 5, 100 + step);
    p.forward_backward(ds.input, ds.target);
    ref_opt.zero_grad();
    ref.loss(reference_forward(ref, ds.input), ds.target).backward();
    const std::map<std::string, torch::Tensor> ref_by_name(ref_params.begin(), ref_params.end());
    for (auto& [name, t] : p.named_parameters()) {
      const torch::Tensor want_grad = ref_by_name.at(name).grad();
      if (exact) {
        EXPECT_TRUE(torch::equal(t.grad(), want_grad)) << name << " at step " << step;
      } else {
        expect_close(t.grad(), want_grad, fmt::format("{} at step {}", name, step));
      }
    }
    p.optimizer_step();
    ref_opt.step();
  }
  std::map<std::string, torch::Tensor> ref_after;
  for (auto& [name, t] : ref_params) ref_after[name] = t.detach();
  for (auto& [name, t] : p.named_parameters()) {
    // Adam divides by sqrt(v): 3 steps of lr 1e-2 turn gradient differences of 1e-5 relative
    // into parameter differences well below 1e-5 absolute.
    const double diff = (t.detach() - ref_after.at(name)).abs().max().item<double>();
    EXPECT_LE(diff, exact ? 0.0 : 1e-5) << name << " after 3 Adam steps";
  }
}

std::vector<Case> matrix() {
  std::vector<Case> cases;
  for (std::string s : {"sequential", "gpipe", "1f1b"}) {
    for (int stages = 1; stages <= 4; ++stages) {
      for (int m : {1, 3, 8}) cases.push_back({s, stages, m, 48});
      cases.push_back({s, stages, 8, 50});  // uneven: 50 into 8 is 7,7,6,6,6,6,6,6
    }
  }
  // Split backward: I then W.
  for (int stages = 2; stages <= 4; ++stages) {
    for (int m : {1, 3, 8}) cases.push_back({"zb-h1", stages, m, 48});
    cases.push_back({"zb-h1", stages, 8, 50});
  }
  // Interleaved: 2 devices with 2 or 3 chunks each.
  for (int v : {2, 3}) {
    for (int m : {2, 4, 8}) cases.push_back({"interleaved", 2 * v, m, 48, v});
    cases.push_back({"interleaved", 2 * v, 8, 50, v});
  }
  // zb-v: two chunks per device in a V (device d holds stages d and 2p-1-d).
  for (int devices : {2, 3}) {
    for (int m : {2, 4, 8}) cases.push_back({"zb-v", 2 * devices, m, 48, 2});
    cases.push_back({"zb-v", 2 * devices, 8, 50, 2});
  }
  // v-half and v-min: zb-v's V with the micro-batches each device holds capped.
  for (const char* v : {"v-half", "v-min"}) {
    for (int devices : {2, 3}) {
      cases.push_back({v, 2 * devices, 8, 48, 2});
      cases.push_back({v, 2 * devices, 5, 50, 2});  // uneven micro-batches
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Equivalence, ::testing::ValuesIn(matrix()), case_name);

class SkipEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(SkipEquivalence, SkipsAcrossNonAdjacentStagesAndTwoConsumers) {
  auto make = [] { return testing::skip_model(); };
  Data d = make_data(20, 6, 3);
  auto want = reference_grads(make, d);
  runtime::PipelineOptions o;
  o.devices = cpu_devices(4);
  o.schedule = GetParam();
  o.microbatches = 3;
  graph::Model m = make();
  auto part = graph::partition_by_balance(m, {1, 1, 1, 3});
  runtime::Pipeline p(std::move(m), part, o);
  // x1 travels 0->1 and 0->3 directly; x2 travels 1->2 and 1->3.
  ASSERT_EQ(p.flow().outputs[0].size(), 2u);
  EXPECT_EQ(p.flow().outputs[0][1].to_stage, 3);
  EXPECT_EQ(p.flow().outputs[1].size(), 2u);
  p.forward_backward(d.input, d.target);
  for (auto& [name, t] : p.named_parameters()) expect_close(t.grad(), want.at(name), name);
}

INSTANTIATE_TEST_SUITE_P(Schedules, SkipEquivalence,
                         ::testing::Values("sequential", "gpipe", "1f1b", "zb-h1"));

// The same skips with two stages per device: interleaved places stages 0,1,0,1 and zb-v
// 0,1,1,0, so x1 and x2 also travel between chunks of one device. 4 and 6 micro-batches of a
// batch of 21: uneven sizes.
class SkipEquivalenceTwoChunks : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(SkipEquivalenceTwoChunks, SkipsBetweenChunks) {
  const auto [schedule, microbatches] = GetParam();
  auto make = [] { return testing::skip_model(); };
  Data d = make_data(21, 6, 3);
  auto want = reference_grads(make, d);
  runtime::PipelineOptions o;
  o.devices = cpu_devices(2);
  o.schedule = schedule;
  o.virtual_stages = 2;
  o.microbatches = microbatches;
  graph::Model m = make();
  runtime::Pipeline p(std::move(m), graph::partition_by_balance(make(), {1, 1, 1, 3}), o);
  EXPECT_EQ(p.stage_device(),
            (schedule == "zb-v" ? std::vector<int>{0, 1, 1, 0} : std::vector<int>{0, 1, 0, 1}));
  p.forward_backward(d.input, d.target);
  for (auto& [name, t] : p.named_parameters()) expect_close(t.grad(), want.at(name), name);
}

INSTANTIATE_TEST_SUITE_P(Schedules, SkipEquivalenceTwoChunks,
                         ::testing::Combine(::testing::Values("interleaved", "zb-v"),
                                            ::testing::Values(4, 6)));

TEST(SplitBackward, WeightGradientsWaitForTheWAction) {
  // zb-h1 defers the weight gradients of Linear layers to W: the gradients are complete only
  // after the whole step, and equal those of 1F1B.
  auto run = [](const std::string& schedule) {
    runtime::PipelineOptions o;
    o.devices = cpu_devices(3);
    o.schedule = schedule;
    o.microbatches = 6;
    graph::Model m = testing::small_mlp();
    auto part = graph::partition_by_parameters(m, 3);
    runtime::Pipeline p(std::move(m), part, o);
    Data d = make_data(24, 12, 5);
    p.forward_backward(d.input, d.target);
    bool saw_w = false;
    for (const auto& t : p.last_timings()) saw_w |= t.action.op == schedule::Op::kWeight;
    std::map<std::string, torch::Tensor> g;
    for (auto& [name, t] : p.named_parameters()) g[name] = t.grad().clone();
    return std::make_pair(saw_w, g);
  };
  auto [w1, g1] = run("1f1b");
  auto [w2, g2] = run("zb-h1");
  EXPECT_FALSE(w1);
  EXPECT_TRUE(w2);
  for (auto& [name, t] : g1) expect_close(g2.at(name), t, name);
}

TEST(Equivalence, SeveralStagesOnOneDevice) {
  auto make = [] { return testing::skip_model(); };
  Data d = make_data(12, 6, 3);
  auto want = reference_grads(make, d);
  runtime::PipelineOptions o;
  o.devices = cpu_devices(2);
  o.stage_device = {0, 1, 0, 1};
  o.schedule = "gpipe";
  o.microbatches = 4;
  graph::Model m = make();
  auto part = graph::partition_by_balance(m, {1, 1, 1, 3});
  runtime::Pipeline p(std::move(m), part, o);
  p.forward_backward(d.input, d.target);
  for (auto& [name, t] : p.named_parameters()) expect_close(t.grad(), want.at(name), name);
}

TEST(Equivalence, LossIsTheMeanOverTheBatch) {
  auto make = [] { return testing::small_mlp(); };
  Data d = make_data(50, 12, 5);
  graph::Model ref = make();
  const double want = ref.loss(reference_forward(ref, d.input), d.target).item<double>();
  runtime::PipelineOptions o;
  o.devices = cpu_devices(3);
  o.microbatches = 8;
  graph::Model m = make();
  runtime::Pipeline p(std::move(m), graph::partition_by_parameters(make(), 3), o);
  EXPECT_NEAR(p.forward_backward(d.input, d.target).loss, want, 1e-6);
}

}  // namespace
}  // namespace tandem
