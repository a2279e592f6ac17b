// Memory accounting asserted from the byte counts, never from timing: under GPipe a device's
// peak grows with the micro-batch count, under 1F1B it does not, recomputation lowers it, and
// a budget turns into an error that names where it was exceeded.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/runtime/pipeline.h"
#include "test_models.h"

namespace tandem {
namespace {

// Wide layers with little weight: activations dominate a device's bytes.
graph::Model wide_model() {
  torch::manual_seed(1);
  graph::Model m;
  m.name = "wide";
  m.layers.push_back(models::linear_layer("a", 16, 512, true, "input", "x1"));
  m.layers.push_back(models::linear_layer("b", 512, 512, true, "x1", "x2"));
  m.layers.push_back(models::linear_layer("c", 512, 512, true, "x2", "x3"));
  m.layers.push_back(models::linear_layer("d", 512, 4, false, "x3", "output"));
  m.loss = models::cross_entropy_loss;
  return m;
}

uint64_t stage0_peak(const std::string& schedule, int microbatches, bool recompute = false) {
  runtime::PipelineOptions o;
  o.devices = parse_devices("2", 1);
  o.schedule = schedule;
  o.microbatches = microbatches;
  o.recompute = recompute;
  graph::Model m = wide_model();
  auto part = graph::partition_by_balance(m, {2, 2});
  runtime::Pipeline p(std::move(m), part, o);
  const int64_t batch = 8 * microbatches;  // micro-batches of 8 samples
  torch::Tensor x = torch::randn({batch, 16}), y = torch::randint(4, {batch});
  p.forward_backward(x, y);  // first step allocates the gradients
  return p.forward_backward(x, y).peak_bytes[0];
}

TEST(Memory, GpipePeakGrowsWithMicrobatches) {
  const uint64_t p4 = stage0_peak("gpipe", 4), p8 = stage0_peak("gpipe", 8), p16 = stage0_peak("gpipe", 16);
  EXPECT_GT(p8, p4);
  EXPECT_GT(p16, p8);
  // Each extra micro-batch holds two 8x512 float activations (x1, x2) at least.
  EXPECT_GE(p16 - p8, 8u * 2 * 8 * 512 * 4);
}

TEST(Memory, OneFOneBPeakDoesNotGrowWithMicrobatches) {
  const uint64_t p4 = stage0_peak("1f1b", 4), p16 = stage0_peak("1f1b", 16);
  // Stage 0 of 2 holds at most 2 micro-batches whatever their count; the gradients of one
  // more scalar loss slice are the only difference allowed.
  EXPECT_LE(p16, p4 + 4096) << "1f1b peak grew from " << p4 << " to " << p16;
  EXPECT_LT(p16, stage0_peak("gpipe", 16));
}

TEST(Memory, RecomputationLowersThePeak) {
  const uint64_t stored = stage0_peak("gpipe", 8), recomputed = stage0_peak("gpipe", 8, true);
  EXPECT_LT(recomputed, stored);
}

TEST(Memory, BudgetExceededNamesDeviceStageAndPhase) {
  runtime::PipelineOptions o;
  o.devices = parse_devices("2", 1);
  o.schedule = "gpipe";
  o.microbatches = 8;
  graph::Model m = wide_model();
  auto part = graph::partition_by_balance(m, {2, 2});
  // Enough for the parameters (~1.1 MiB on stage 0 with gradients) but not 8 micro-batches
  // of activations.
  o.device_memory = 1600 * 1024;
  runtime::Pipeline p(std::move(m), part, o);
  torch::Tensor x = torch::randn({256, 16}), y = torch::randint(4, {256});
  try {
    p.forward_backward(x, y);
    FAIL() << "no out-of-memory error";
  } catch (const runtime::StepError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(e.out_of_memory) << what;
    EXPECT_NE(what.find("out of its"), std::string::npos) << what;
    EXPECT_NE(what.find("cpu:"), std::string::npos) << what;
    EXPECT_NE(what.find("forward"), std::string::npos) << what;
    EXPECT_NE(what.find("micro-batch"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tandem
