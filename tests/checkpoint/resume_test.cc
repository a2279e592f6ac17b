// Exact resume: a run interrupted at step k, saved, and continued by a new pipeline (new model
// objects initialized differently, as in a new process) reaches bitwise the parameters of the
// uninterrupted run on CPU. That needs the parameters, the optimizer state (Adam's step and
// moments, SGD's momentum) and the step (dropout streams are keyed by it) restored exactly.
#include <gtest/gtest.h>

#include "checkpoint/optimizer_state.h"
#include "helpers.h"
#include "tandem/checkpoint/all.h"

namespace tandem::checkpoint {
namespace {

using namespace testing;

std::map<std::string, torch::Tensor> uninterrupted(const Recipe& s, int64_t steps) {
  auto p = make_pipeline(s);
  train_until(*p, steps);
  return snapshot(*p);
}

void expect_exact_resume(const Recipe& s) {
  TempDir dir;
  const auto want = uninterrupted(s, 6);

  auto first = make_pipeline(s);
  train_until(*first, 3);
  save(*first, {3, 0, 24, 5}, dir.path());
  first.reset();

  Recipe other = s;
  other.init_seed = 99;  // prove the parameters come from the checkpoint
  auto resumed = make_pipeline(other);
  TrainState state = load(*resumed, dir.path());
  EXPECT_EQ(state.step, 3);
  EXPECT_EQ(state.position, 24);
  EXPECT_EQ(state.seed, 5u);
  EXPECT_EQ(resumed->step(), 3);
  train_until(*resumed, 6);
  expect_bitwise_equal(snapshot(*resumed), want);
}

TEST(Resume, AdamWithDropoutIsBitwiseExact) { expect_exact_resume(Recipe{}); }

TEST(Resume, SgdWithMomentumIsBitwiseExact) {
  Recipe s;
  s.optimizer = "sgd";
  expect_exact_resume(s);
}

TEST(Resume, WithoutTheStepDropoutDiffers) {
  // The control for the test above: the same parameters and optimizer state, but the step
  // left at 0, give other dropout masks and so other parameters.
  TempDir dir;
  Recipe s;
  const auto want = uninterrupted(s, 6);
  auto first = make_pipeline(s);
  train_until(*first, 3);
  save(*first, {3, 0, 24, 5}, dir.path());
  auto resumed = make_pipeline(s);
  load(*resumed, dir.path());
  resumed->set_step(0);
  for (int i = 0; i < 3; ++i) {
    auto [x, y] = batch(3 + i);
    resumed->forward_backward(x, y);
    resumed->optimizer_step();
  }
  const auto got = snapshot(*resumed);
  bool any_differs = false;
  for (const auto& [name, w] : want) any_differs |= !torch::equal(got.at(name), w);
  EXPECT_TRUE(any_differs);
}

// Bit for bit, as the README promises: the resumed run on 3 stages (or 1) computes every layer
// on the same micro-batches with the same dropout masks (keyed by layer, not stage), in the same
// order, with one thread per device; only the stage boundaries move, and a tensor that crosses
// one is copied, not changed.
TEST(Resume, OntoADifferentPartition) {
  TempDir dir;
  Recipe two;  // balance 3,3
  const auto want = uninterrupted(two, 6);
  auto first = make_pipeline(two);
  train_until(*first, 3);
  const auto at3 = snapshot(*first);
  save(*first, {3, 0, 24, 5}, dir.path());

  for (std::vector<int> balance : {std::vector<int>{2, 2, 2}, std::vector<int>{6}}) {
    Recipe other = two;
    other.balance = balance;
    other.init_seed = 99;
    auto resumed = make_pipeline(other);
    load(*resumed, dir.path());
    expect_bitwise_equal(snapshot(*resumed), at3);
    train_until(*resumed, 6);
    SCOPED_TRACE(fmt::format("resumed on {} stages", balance.size()));
    expect_bitwise_equal(snapshot(*resumed), want);
  }
}

TEST(Resume, OptimizerStateFollowsItsParameterToAnotherStage) {
  TempDir dir;
  Recipe two;
  auto first = make_pipeline(two);
  train_until(*first, 2);
  save(*first, {2, 0, 16, 5}, dir.path());
  std::map<std::string, ParamState> want;
  for (int s : first->local_stages()) {
    auto st = export_state(*first->optimizer(s), first->stage_named_parameters(s));
    want.insert(st.begin(), st.end());
  }
  ASSERT_EQ(want.size(), 8u);  // weight and bias of dense0, block0.dense0, block0.dense1, logits

  Recipe three = two;
  three.balance = {1, 4, 1};
  auto resumed = make_pipeline(three);
  load(*resumed, dir.path());
  std::map<std::string, ParamState> got;
  for (int s : resumed->local_stages()) {
    auto st = export_state(*resumed->optimizer(s), resumed->stage_named_parameters(s));
    got.insert(st.begin(), st.end());
  }
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, fields] : want) {
    ASSERT_EQ(got.at(name).size(), fields.size()) << name;
    for (const auto& [field, t] : fields) {
      EXPECT_TRUE(torch::equal(got.at(name).at(field), t)) << name << "/" << field;
    }
  }
  EXPECT_EQ(want.at("dense0.weight").at("step").item<int64_t>(), 2);
}

TEST(Resume, WithoutAnOptimizerLoadsTheTensorsOnly) {
  TempDir dir;
  Recipe s;
  auto first = make_pipeline(s);
  train_until(*first, 2);
  save(*first, {2, 0, 16, 5}, dir.path());
  auto eval = make_pipeline(s, /*with_optimizer=*/false);
  load(*eval, dir.path());
  expect_bitwise_equal(snapshot(*eval), snapshot(*first));
  EXPECT_EQ(eval->step(), 2);
}

TEST(Resume, AnotherOptimizerKindIsRefused) {
  TempDir dir;
  Recipe s;
  auto first = make_pipeline(s);
  train_until(*first, 1);
  save(*first, {1, 0, 8, 5}, dir.path());
  Recipe sgd = s;
  sgd.optimizer = "sgd";
  auto resumed = make_pipeline(sgd);
  const auto before = snapshot(*resumed);
  EXPECT_THROW_WITH(load(*resumed, dir.path()), "holds adam optimizer state", "uses sgd",
                    "Config::optimizer = adam");
  expect_bitwise_equal(snapshot(*resumed), before);  // nothing half-loaded
}

TEST(Resume, SaveChecksTheStep) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  train_until(*p, 2);
  EXPECT_THROW_WITH(save(*p, {3, 0, 0, 5}, dir.path()), "says step 3", "has run 2 steps");
  EXPECT_THROW_WITH(save(*p, {2, 0, 0, 5}, dir.path(), keep(-1)), "SaveOptions::keep");
}

TEST(Resume, SaveBeforeAnyStepHasNoOptimizerState) {
  TempDir dir;
  auto p = make_pipeline(Recipe{});
  save(*p, {0, 0, 0, 5}, dir.path());
  Recipe other;
  other.init_seed = 99;
  auto q = make_pipeline(other);
  load(*q, dir.path());
  expect_bitwise_equal(snapshot(*q), snapshot(*p));
  for (int s : q->local_stages()) EXPECT_TRUE(q->optimizer(s)->state().empty());
}

}  // namespace
}  // namespace tandem::checkpoint
