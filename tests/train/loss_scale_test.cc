// Dynamic loss scaling (train/loss_scale.h): the scaler's rule, a step whose gradient overflows on
// one stage skipped on every stage with the weights bitwise those of the step before, a scaled
// run that overflows nowhere training bitwise the weights of an unscaled one (a power of two
// changes no bit), and a resumed run equal to the uninterrupted one, its scale included.
// Under MPI: tests/mpi/loss_scale_main.cc.
#include "tandem/train/loss_scale.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "overflow_model.h"
#include "scratch.h"
#include "tandem/train/trainer.h"

namespace tandem {
namespace {

using testing::overflow_switch;
using testing::same_bits;
using testing::weights_of;

TEST(LossScaler, HalvesAtAnOverflowAndDoublesAfterTheIntervalOfCleanSteps) {
  train::LossScaler s(1024.0, 3);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.clean_steps(), 2);
  s.update(false);
  EXPECT_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.clean_steps(), 0) << "an overflow starts the count again";
  EXPECT_EQ(s.skipped_steps(), 1);
  for (int i = 0; i < 3; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.clean_steps(), 0);
  // A scale that would leave fp32's range stays where it is.
  train::LossScaler top(std::ldexp(1.0, 127), 1);
  top.update(true);
  EXPECT_EQ(top.scale(), std::ldexp(1.0, 127));
  s.restore(8.0, 2, 5);
  EXPECT_EQ(s.scale(), 8.0);
  s.update(true);
  EXPECT_EQ(s.scale(), 16.0) << "the restored count of clean steps goes on";
  EXPECT_EQ(s.skipped_steps(), 5);
  EXPECT_THROW(train::LossScaler(0.0, 1), Error);
  EXPECT_THROW(s.restore(-1.0, 0, 0), Error);
}

train::Config config(train::LossScaling scaling) {
  train::Config c;
  c.model = "overflow";
  c.data = "overflow-points";
  c.devices = "2";
  c.balance = {1, 2};  // the gain layer, whose gradient overflows, on stage 1
  c.batch = 8;
  c.microbatches = 2;
  c.steps = 6;
  c.optimizer = train::OptimizerKind::kAdam;
  c.lr = 0.05;
  c.loss_scaling = scaling;
  c.loss_scale_interval = 2;
  c.progress = trace::Progress::Mode::kNone;
  return c;
}

std::unique_ptr<train::Trainer> trainer(const train::Config& c) {
  return std::make_unique<train::Trainer>(c, testing::overflow_model(),
                                          std::make_unique<testing::OverflowSource>());
}

// Runs `t` to its end with the overflow on in step `bad` (from 0; -1: never).
train::Result run_with_overflow(train::Trainer& t, int64_t bad) {
  overflow_switch() = bad == 0;
  train::Result r = t.run([bad](int64_t done, int64_t, const runtime::StepStats&, double) {
    overflow_switch() = done == bad;  // `done` steps are done: the next is step `done`
  });
  overflow_switch() = false;
  return r;
}

TEST(LossScaling, AnOverflowOnOneStageSkipsTheStepOnEveryStage) {
  auto t = trainer(config(train::LossScaling::kDynamic));
  ASSERT_NE(t->loss_scaler(), nullptr);
  EXPECT_EQ(t->loss_scaler()->scale(), 65536.0);
  t->train_step(0);
  const auto before = weights_of(*t);
  overflow_switch() = true;
  const runtime::StepStats bad = t->train_step(1);
  overflow_switch() = false;
  EXPECT_TRUE(bad.skipped);
  EXPECT_EQ(bad.loss_scale, 65536.0);
  EXPECT_EQ(t->loss_scaler()->scale(), 32768.0) << "the scale halves";
  EXPECT_EQ(t->loss_scaler()->skipped_steps(), 1);
  EXPECT_TRUE(same_bits(weights_of(*t), before))
      << "stage 0, whose gradients were finite, changed its weights too";
  const runtime::StepStats good = t->train_step(2);
  EXPECT_FALSE(good.skipped);
  EXPECT_EQ(good.loss_scale, 32768.0);
  EXPECT_FALSE(same_bits(weights_of(*t), before)) << "a clean step after the skipped one trains";
}

TEST(LossScaling, ScalingThatOverflowsNowhereChangesNoBit) {
  auto plain = trainer(config(train::LossScaling::kNone));
  auto scaled = trainer(config(train::LossScaling::kDynamic));
  EXPECT_EQ(plain->loss_scaler(), nullptr) << "fp32 with --loss-scale none scales nothing";
  const train::Result a = run_with_overflow(*plain, -1);
  const train::Result b = run_with_overflow(*scaled, -1);
  EXPECT_TRUE(same_bits(weights_of(*plain), weights_of(*scaled)));
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(b.skipped_steps, 0);
  EXPECT_EQ(b.loss_scale, 65536.0 * 8) << "6 clean steps at an interval of 2: three doublings";
  // auto scales only fp16's loss.
  EXPECT_EQ(trainer(config(train::LossScaling::kAuto))->loss_scaler(), nullptr);
}

TEST(LossScaling, AResumedRunGoesOnFromTheCheckpointsScale) {
  const std::string dir = testing::scratch_path("loss_scale_resume");
  std::filesystem::remove_all(dir);
  train::Config c = config(train::LossScaling::kDynamic);
  auto whole = trainer(c);
  const train::Result all = run_with_overflow(*whole, 1);
  EXPECT_EQ(all.skipped_steps, 1);
  // Step 1 skipped (2^15), steps 2-5 clean: two doublings.
  EXPECT_EQ(all.loss_scale, 131072.0);
  c.save_dir = dir;
  c.save_every = 2;
  c.steps = 2;  // stops after the skipped step, at scale 2^15 with no clean step since
  auto first = trainer(c);
  run_with_overflow(*first, 1);
  c.steps = 6;
  c.resume = dir;
  auto rest = trainer(c);
  EXPECT_EQ(rest->loss_scaler()->scale(), 32768.0);
  EXPECT_EQ(rest->loss_scaler()->skipped_steps(), 1);
  const train::Result resumed = run_with_overflow(*rest, -1);
  EXPECT_EQ(resumed.loss_scale, all.loss_scale);
  EXPECT_EQ(resumed.skipped_steps, all.skipped_steps);
  EXPECT_TRUE(same_bits(weights_of(*rest), weights_of(*whole)));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem
