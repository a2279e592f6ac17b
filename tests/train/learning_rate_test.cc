// Trainer::learning_rate: --lr on every step (constant), or a cosine from --lr down to 0 over
// the run's steps (--steps, or --epochs times the steps of an epoch); and Trainer::run gives
// each step's rate to every stage's optimizer, which steps with it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "tandem/train/trainer.h"

namespace tandem::train {
namespace {

// A small run on synthetic volumes: 64 training samples in batches of 8 (8 steps an epoch).
Config tiny(LrSchedule lr_schedule, int64_t steps, int epochs = 1) {
  Config c;
  c.model = "conv3d-stack";
  c.data = "regression";
  c.volume = 8;
  c.convs = 2;
  c.filters = 4;
  c.devices = "2";
  c.threads_per_device = 1;
  c.batch = 8;
  c.microbatches = 2;
  c.train_samples = 64;
  c.test_samples = 0;
  c.steps = steps;
  c.epochs = epochs;
  c.lr = 0.1;
  c.lr_schedule = lr_schedule;
  c.optimizer = OptimizerKind::kSgd;
  c.momentum = 0;
  return c;
}

constexpr double kPi = 3.14159265358979323846;

TEST(LearningRate, ConstantIsTheLrOnEveryStep) {
  Trainer t(tiny(LrSchedule::kConstant, 8));
  for (int64_t k = 0; k < 8; ++k) EXPECT_EQ(t.learning_rate(k), 0.1) << k;
}

// lr (1 + cos(pi k / n)) / 2 over n = 8 steps: the lr at step 0, half of it halfway, 0 at n;
// symmetric about the middle and falling all the way.
TEST(LearningRate, CosineFallsFromTheLrToZeroOverTheSteps) {
  Trainer t(tiny(LrSchedule::kCosine, 8));
  ASSERT_EQ(t.total_steps(), 8);
  EXPECT_EQ(t.learning_rate(0), 0.1);
  EXPECT_DOUBLE_EQ(t.learning_rate(2), 0.1 * (2 + std::sqrt(2.0)) / 4);  // cos(pi/4) = sqrt(2)/2
  EXPECT_DOUBLE_EQ(t.learning_rate(4), 0.05);
  EXPECT_NEAR(t.learning_rate(8), 0.0, 1e-17);
  for (int64_t k = 0; k < 8; ++k) {
    EXPECT_GT(t.learning_rate(k), t.learning_rate(k + 1)) << k;
    EXPECT_NEAR(t.learning_rate(k) + t.learning_rate(8 - k), 0.1, 1e-16) << k;
    EXPECT_DOUBLE_EQ(t.learning_rate(k), 0.1 * (1 + std::cos(kPi * k / 8)) / 2) << k;
  }
}

// Without --steps the run is --epochs times the steps of an epoch (3 x 64/8 = 24), and the
// cosine spans all of it.
TEST(LearningRate, CosineSpansEveryEpoch) {
  Trainer t(tiny(LrSchedule::kCosine, 0, 3));
  ASSERT_EQ(t.total_steps(), 24);
  EXPECT_DOUBLE_EQ(t.learning_rate(12), 0.05);
  EXPECT_DOUBLE_EQ(t.learning_rate(6), 0.1 * (2 + std::sqrt(2.0)) / 4);
}

// Each step's rate reaches every stage's optimizer, and SGD (no momentum) moves each parameter
// by exactly -rate x its gradient: step k (from 1) uses learning_rate(k - 1).
TEST(LearningRate, RunStepsEveryStageWithTheStepsRate) {
  Trainer t(tiny(LrSchedule::kCosine, 5));
  auto& p = t.pipeline();
  std::map<std::string, torch::Tensor> before;
  auto snapshot = [&] {
    before.clear();
    for (const auto& [name, w] : p.named_parameters()) before[name] = w.detach().clone();
  };
  snapshot();
  int64_t seen = 0;
  t.run([&](int64_t step, int64_t total, const runtime::StepStats&, double) {
    ++seen;
    EXPECT_EQ(total, 5);
    const double lr = t.learning_rate(step - 1);
    for (int stage : p.local_stages()) {
      for (auto& group : p.optimizer(stage)->param_groups())
        EXPECT_EQ(group.options().get_lr(), lr) << "stage " << stage << " step " << step;
    }
    for (const auto& [name, w] : p.named_parameters()) {
      // fp32: the update w - lr g is rounded once, to half an ulp of w (6e-8 of its largest
      // magnitude, 1.2e-7 allowed); a rate off by the next step's (a few % here) moves it by
      // that fraction of lr g, which is 10^3 times more on these gradients.
      const torch::Tensor moved = w.detach() - before.at(name), want = -lr * w.grad();
      const double off = (moved - want).abs().max().item<double>();
      const double bound = 1.2e-7 * before.at(name).abs().max().item<double>();
      EXPECT_LE(off, bound) << name << " at step " << step << " moved "
                            << moved.abs().max().item<double>() << ", lr x gradient is "
                            << want.abs().max().item<double>() << " with lr " << lr;
    }
    snapshot();
  });
  EXPECT_EQ(seen, 5);
}

}  // namespace
}  // namespace tandem::train
