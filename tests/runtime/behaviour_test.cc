// How a pipeline behaves beyond its numbers: failures end the step without hanging, 1F1B
// bounds the micro-batches a stage holds, dropout masks do not depend on the placement.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <future>

#include "tandem/graph/call_context.h"
#include "tandem/runtime/pipeline.h"
#include "test_models.h"

namespace tandem {
namespace {

std::vector<DeviceSpec> cpu_devices(int n) { return parse_devices(std::to_string(n), 1); }

torch::Tensor inputs(int64_t batch, int64_t features) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(5);
  return torch::randn({batch, features}, gen);
}
torch::Tensor labels(int64_t batch, int64_t classes) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(6);
  return torch::randint(classes, {batch}, gen);
}

// A small MLP whose layer on stage 2 of 4 throws in forward (or backward) of micro-batch 1.
graph::Model failing_model(bool in_backward) {
  graph::Model m = testing::small_mlp();
  // Layers: flatten dense0 | block0.dense0 | block0.dense1 | dropout logits (balance 2,1,1,2).
  auto& layer = m.layers[3];
  auto inner = layer.forward;
  layer.forward = [inner, in_backward](const graph::Tensors& in) {
    graph::Tensors out = inner(in);
    if (graph::current_call().microbatch == 1) {
      if (!in_backward) throw std::runtime_error("bad value in layer block0.dense1");
      out[0].register_hook([](torch::Tensor g) -> torch::Tensor {
        throw std::runtime_error("bad gradient in layer block0.dense1");
      });
    }
    return out;
  };
  return m;
}

class Failure : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(Failure, ReachesTheCallerWithDeviceStageActionAndMicrobatch) {
  auto [schedule, in_backward] = GetParam();
  runtime::PipelineOptions o;
  o.devices = cpu_devices(4);
  o.schedule = schedule;
  o.microbatches = 4;
  o.comm_timeout = std::chrono::seconds(60);
  graph::Model m = failing_model(in_backward);
  auto part = graph::partition_by_balance(m, {2, 1, 1, 2});
  runtime::Pipeline p(std::move(m), part, o);
  auto fut = std::async(std::launch::async, [&] {
    try {
      p.forward_backward(inputs(16, 12), labels(16, 5));
    } catch (const runtime::StepError& e) {
      return std::string(e.what()) +
             fmt::format("|stage={}|mb={}|action={}", e.stage, e.microbatch, e.action);
    }
    return std::string("no error");
  });
  // The failure must end the step on every device at once. Without that the devices waiting for
  // the failed one would sit out their 60 s comm timeout; the step's own work (16 samples of a
  // small MLP) takes milliseconds, so 30 s tells the two apart on any load.
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "the step hangs";
  const std::string what = fut.get();
  EXPECT_NE(what.find(in_backward ? "bad gradient" : "bad value"), std::string::npos) << what;
  EXPECT_NE(what.find("stage 2"), std::string::npos) << what;
  EXPECT_NE(what.find("cpu:2"), std::string::npos) << what;
  EXPECT_NE(what.find(in_backward ? "action 2B1" : "action 2F1"), std::string::npos) << what;
  EXPECT_NE(what.find("|stage=2|mb=1"), std::string::npos) << what;
  EXPECT_NE(what.find("[2"), std::string::npos) << "grid with the failing action marked: " << what;

  // The pipeline stays usable: the next step (no failing micro-batch) succeeds.
  auto ok = std::async(std::launch::async,
                       [&] { return p.forward_backward(inputs(4, 12), labels(4, 5)); });
  ASSERT_EQ(ok.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the step after a failure hangs";
  // 4 samples in 4 micro-batches: micro-batch 1 exists, so the failure repeats.
  EXPECT_THROW(ok.get(), runtime::StepError);
}

INSTANTIATE_TEST_SUITE_P(Schedules, Failure,
                         ::testing::Combine(::testing::Values("gpipe", "1f1b"), ::testing::Bool()));

// A LibTorch error inside a layer (here shapes that do not multiply) reaches the caller with
// LibTorch's message and the place, without LibTorch's C++ backtrace.
TEST(StepFailure, ALibTorchErrorKeepsItsMessageWithoutTheBacktrace) {
  graph::Model m = testing::small_mlp();
  m.layers[3].forward = [](const graph::Tensors& in) {
    return graph::Tensors{torch::mm(in[0], torch::ones({3, 3}))};
  };
  runtime::PipelineOptions o;
  o.devices = cpu_devices(2);
  o.microbatches = 2;
  auto part = graph::partition_by_balance(m, {3, 3});
  runtime::Pipeline p(std::move(m), part, o);
  try {
    p.forward_backward(inputs(8, 12), labels(8, 5));
    FAIL() << "no error";
  } catch (const runtime::StepError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("stage 1, action 1F0 (micro-batch 0): mat1 and mat2 shapes cannot be "
                        "multiplied"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find("Exception raised from"), std::string::npos) << what;
    EXPECT_EQ(what.find("frame #"), std::string::npos) << what;
  }
}

TEST(Inflight, OneFOneBHoldsAtMostStagesMinusIndexGpipeHoldsAll) {
  for (int m : {2, 4, 8}) {
    for (std::string s : {"1f1b", "gpipe"}) {
      runtime::PipelineOptions o;
      o.devices = cpu_devices(4);
      o.schedule = s;
      o.microbatches = m;
      graph::Model model = testing::small_mlp();
      auto part = graph::partition_by_balance(model, {2, 1, 1, 2});
      runtime::Pipeline p(std::move(model), part, o);
      auto stats = p.forward_backward(inputs(16, 12), labels(16, 5));
      for (int stage = 0; stage < 4; ++stage) {
        const int want = s == "1f1b" ? std::min(4 - stage, m) : m;
        EXPECT_EQ(stats.peak_inflight[stage], want) << s << " m=" << m << " stage " << stage;
      }
    }
  }
}

TEST(Dropout, MasksDoNotDependOnScheduleOrPartition) {
  // Same micro-batches, different schedules and stage counts: with dropout 0.5 the gradients
  // agree only if every micro-batch drew the same mask everywhere.
  std::map<std::string, torch::Tensor> first;
  std::string first_name;
  for (auto [schedule, stages] : std::vector<std::pair<std::string, int>>{
           {"sequential", 1}, {"gpipe", 2}, {"1f1b", 4}, {"1f1b", 3}}) {
    runtime::PipelineOptions o;
    o.devices = cpu_devices(stages);
    o.schedule = schedule;
    o.microbatches = 4;
    o.seed = 42;
    graph::Model model = testing::small_mlp(0.5);
    auto part = graph::partition_by_parameters(model, stages);
    runtime::Pipeline p(std::move(model), part, o);
    p.forward_backward(inputs(16, 12), labels(16, 5));
    std::string name = fmt::format("{} x{}", schedule, stages);
    for (auto& [pname, t] : p.named_parameters()) {
      if (first.size() < p.named_parameters().size() && first_name.empty()) {
        first[pname] = t.grad().clone();
        continue;
      }
      const double scale = first.at(pname).abs().max().item<double>();
      EXPECT_LE((t.grad() - first.at(pname)).abs().max().item<double>(), 1e-5 * scale + 1e-7)
          << pname << ": " << name << " against " << first_name;
    }
    if (first_name.empty()) first_name = name;
  }
}

TEST(Dropout, DifferentSeedsDrawDifferentMasks) {
  auto grads = [](uint64_t seed) {
    runtime::PipelineOptions o;
    o.devices = cpu_devices(2);
    o.microbatches = 2;
    o.seed = seed;
    graph::Model model = testing::small_mlp(0.5);
    auto part = graph::partition_by_parameters(model, 2);
    runtime::Pipeline p(std::move(model), part, o);
    p.forward_backward(inputs(8, 12), labels(8, 5));
    return p.named_parameters().back().second.grad().clone();
  };
  EXPECT_FALSE(torch::allclose(grads(1), grads(2)));
  EXPECT_TRUE(torch::equal(grads(3), grads(3)));
}

TEST(PlacementLog, BackwardRunsOnTheDeviceThatHoldsEachLayer) {
  runtime::PipelineOptions o;
  o.devices = cpu_devices(3);
  o.microbatches = 3;
  o.log_placement = true;
  graph::Model model = testing::small_mlp();
  auto part = graph::partition_by_balance(model, {2, 2, 2});
  runtime::Pipeline p(std::move(model), part, o);
  p.forward_backward(inputs(9, 12), labels(9, 5));
  auto fwd = p.placement_log()->forward();
  auto bwd = p.placement_log()->backward();
  for (int layer = 0; layer < 6; ++layer) {
    const std::string want = fmt::format("cpu:{}", layer / 2);
    EXPECT_EQ(fwd[layer], std::set<std::string>{want}) << "layer " << layer;
    if (layer == 0) continue;  // flatten of the input: nothing needs its gradient
    EXPECT_EQ(bwd[layer], std::set<std::string>{want}) << "layer " << layer;
  }
  EXPECT_NE(p.placement_log_table().find("backward ran on"), std::string::npos);
}

TEST(Errors, MoreMicrobatchesThanSamples) {
  runtime::PipelineOptions o;
  o.devices = cpu_devices(2);
  o.microbatches = 8;
  graph::Model model = testing::small_mlp();
  auto part = graph::partition_by_parameters(model, 2);
  runtime::Pipeline p(std::move(model), part, o);
  try {
    p.forward_backward(inputs(5, 12), labels(5, 5));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8 micro-batches cannot be cut from a batch of 5"),
              std::string::npos)
        << e.what();
  }
}

TEST(Errors, NonFiniteLossNamesStepAndMicrobatch) {
  runtime::PipelineOptions o;
  o.devices = cpu_devices(2);
  o.microbatches = 4;
  graph::Model model = testing::small_mlp();
  auto part = graph::partition_by_parameters(model, 2);
  runtime::Pipeline p(std::move(model), part, o);
  torch::Tensor x = inputs(8, 12);
  x[5][0] = std::numeric_limits<float>::quiet_NaN();  // sample 5: micro-batch 2 (2,2,2,2)
  try {
    p.forward_backward(x, labels(8, 5));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 0 is nan in micro-batch 2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
