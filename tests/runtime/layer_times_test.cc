// Timing each layer of a model on one micro-batch (runtime/layer_times.h): the forward and
// backward of every layer, the split backward when asked for, the parameters' gradients left as
// they were (the backwards add into them, as a pipeline's do), a layer's expected time from its
// repetitions, measurements combined as repetitions, and the measurement's JSON form.
#include "tandem/runtime/layer_times.h"

#include <gtest/gtest.h>

#include "error_of.h"
#include "tandem/graph/partition.h"
#include "test_models.h"

namespace tandem::runtime {
namespace {

TEST(LayerTimes, EveryLayerAndTheSplitBackwardWhenAskedFor) {
  graph::Model m = testing::small_mlp();
  const size_t n = m.layers.size();
  const torch::Tensor x = torch::randn({8, 12});
  const torch::Tensor weight = m.layers[1].module->parameters()[0];  // dense0.weight
  weight.mutable_grad() = torch::full_like(weight, 3.0);
  const torch::Tensor bias = m.layers[1].module->parameters()[1];  // dense0.bias: no gradient
  ASSERT_FALSE(bias.grad().defined());
  const LayerTimes split = measure_layer_times(m, x, nullptr, 0, 2);
  ASSERT_EQ(split.forward.size(), n);
  ASSERT_EQ(split.backward.size(), n);
  ASSERT_EQ(split.input.size(), n);
  ASSERT_EQ(split.weight.size(), n);
  EXPECT_GT(split.forward[1] + split.backward[1], 0.0);  // dense0 does work
  EXPECT_TRUE(torch::equal(weight.grad(), torch::full_like(weight, 3.0)));
  EXPECT_FALSE(bias.grad().defined());  // the measurement's backwards added into zeros, dropped
  // Forward and backward alone: no split halves.
  const LayerTimes whole = measure_layer_times(m, x, nullptr, 0, 2, 1, c10::kFloat, false);
  EXPECT_EQ(whole.forward.size(), n);
  EXPECT_EQ(whole.backward.size(), n);
  EXPECT_TRUE(whole.input.empty());
  EXPECT_TRUE(whole.weight.empty());
  EXPECT_TRUE(torch::equal(weight.grad(), torch::full_like(weight, 3.0)));
  // Both read back from JSON; a measurement with halves for some layers only does not.
  EXPECT_EQ(layer_times_from_json(to_json(split)).weight, split.weight);
  EXPECT_TRUE(layer_times_from_json(to_json(whole)).input.empty());
  LayerTimes broken = split;
  broken.input.pop_back();
  EXPECT_NE(
      error_of([&] { layer_times_from_json(to_json(broken)); }).find("but 6, 5 and 6 backwards"),
      std::string::npos);
}

// A layer's expected time counts its delays, but no repetition for more than twice the median:
// one long delay in a few repetitions would count in every micro-batch.
TEST(LayerTimes, ExpectedTimeCountsDelaysUpToTwiceTheMedian) {
  EXPECT_DOUBLE_EQ(expected_time({1, 1, 1.5}), 3.5 / 3);
  EXPECT_DOUBLE_EQ(expected_time({1, 1, 10}), 4.0 / 3);
  EXPECT_DOUBLE_EQ(expected_time({3, 1}), 2.0);  // the median of two is their mean
  EXPECT_DOUBLE_EQ(expected_time({}), 0.0);
}

// Measurements taken at different moments combine layer by layer as one measurement's
// repetitions do: each time the expected time over them, the optimizer's step and the
// gradients' zeroing their mean, the exchanges as counted first. Measurements of different
// layers do not combine.
TEST(LayerTimes, PassesCombineAsRepetitions) {
  LayerTimes a, b, c;
  a.forward = {1, 2};
  b.forward = {1, 2};
  c.forward = {10, 2.6};  // layer 0 met a long delay: counted at twice the median
  a.backward = {3, 4};
  b.backward = {3, 5};
  c.backward = {6, 6};
  a.step = {1, 0};
  b.step = {2, 0};
  c.step = {6, 0};
  a.zero = {0.5, 0};
  b.zero = {1, 0};
  c.zero = {3, 0};
  a.forward_exchanges = {1, 2};
  b.forward_exchanges = {7, 7};
  const LayerTimes t = combined({a, b, c});
  EXPECT_DOUBLE_EQ(t.forward[0], 4.0 / 3);
  EXPECT_DOUBLE_EQ(t.forward[1], 6.6 / 3);
  EXPECT_DOUBLE_EQ(t.backward[0], 4.0);
  EXPECT_DOUBLE_EQ(t.backward[1], 5.0);
  EXPECT_DOUBLE_EQ(t.step[0], 3.0);  // the plain mean
  EXPECT_DOUBLE_EQ(t.zero[0], 1.5);
  EXPECT_TRUE(t.input.empty());
  EXPECT_EQ(t.forward_exchanges, (std::vector<int>{1, 2}));
  c.backward.pop_back();
  EXPECT_NE(error_of([&] { combined({a, c}); }).find("of 2 and of 1 layers"), std::string::npos);
  EXPECT_THROW(combined({}), Error);
}

}  // namespace
}  // namespace tandem::runtime
