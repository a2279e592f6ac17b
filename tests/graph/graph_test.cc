#include <gtest/gtest.h>
#include <torch/torch.h>

#include "error_of.h"
#include "tandem/common/check.h"
#include "tandem/graph/partition.h"
#include "tandem/models/mlp.h"

namespace tandem::graph {
namespace {

Layer fn(std::string name, std::vector<std::string> in, std::vector<std::string> out) {
  return make_function_layer(
      std::move(name), [](const Tensors& t) { return Tensors{t[0]}; }, std::move(in),
      std::move(out));
}

Model chain(int n) {
  Model m;
  m.name = "chain";
  std::string prev = "input";
  for (int i = 0; i < n; ++i) {
    std::string out = i == n - 1 ? "output" : "t" + std::to_string(i);
    m.layers.push_back(fn("l" + std::to_string(i), {prev}, {out}));
    prev = out;
  }
  m.loss = [](const torch::Tensor& o, const torch::Tensor&) { return o.sum(); };
  return m;
}

TEST(Model, UnknownTensorIsNamed) {
  Model m = chain(3);
  m.layers[2].inputs = {"nope"};
  EXPECT_NE(error_of([&] { m.validate(); }).find("layer 'l2' consumes tensor 'nope'"),
            std::string::npos);
}

TEST(Model, TensorProducedTwice) {
  Model m = chain(3);
  m.layers[2].outputs = {"t0"};
  EXPECT_NE(error_of([&] { m.validate(); }).find("tensor 't0' is produced twice"),
            std::string::npos);
}

TEST(Model, LaterTensorUsedEarlier) {
  Model m = chain(3);
  m.layers[0].inputs = {"t1"};
  EXPECT_NE(error_of([&] { m.validate(); }).find("which no earlier layer produces"),
            std::string::npos);
}

TEST(Model, DuplicateLayerNameAndMissingOutput) {
  Model m = chain(3);
  m.layers[1].name = "l0";
  EXPECT_NE(error_of([&] { m.validate(); }).find("two layers named 'l0'"), std::string::npos);
  Model n = chain(2);
  n.output = "missing";
  EXPECT_NE(error_of([&] { n.validate(); }).find("the loss reads tensor 'missing'"),
            std::string::npos);
}

// A layer names its state in checkpoints by state_names where given (an ONNX initializer's
// name), by "<layer>.<key>" otherwise; two tensors of one name are refused.
TEST(Model, StateNamesNameParametersAndBuffers) {
  Model m = chain(2);
  auto linear = torch::nn::Linear(3, 2);
  auto norm = torch::nn::BatchNorm1d(2);
  m.layers[0].module = linear.ptr();
  m.layers[0].state_names = {{"weight", "fc.weight"}};
  m.layers[1].module = norm.ptr();
  std::vector<std::string> names;
  for (const auto& layer : m.layers) {
    for (const auto& [n, t] : named_parameters(layer)) names.push_back(n);
    for (const auto& [n, t] : named_buffers(layer)) names.push_back(n);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"fc.weight", "l0.bias", "l1.weight", "l1.bias",
                                             "l1.running_mean", "l1.running_var",
                                             "l1.num_batches_tracked"}));
  m.validate();
  m.layers[1].state_names = {{"running_var", "fc.weight"}};
  EXPECT_NE(error_of([&] {
              m.validate();
            }).find("two tensors named 'fc.weight': in layer 'l0' and in layer 'l1'"),
            std::string::npos);
}

// fit_input: samples that differ from the declared shape only by axes of size 1, or that a
// model with flat samples takes, are reshaped; others are refused with both shapes.
TEST(Model, FitInputReshapesOnlyWhatAReshapeCanFit) {
  Model m = chain(1);
  EXPECT_EQ(fit_input(m, torch::zeros({2, 3, 4})).sizes(), (std::vector<int64_t>{2, 3, 4}));
  m.input_shape = {28, 28, 1};
  EXPECT_EQ(fit_input(m, torch::zeros({5, 1, 28, 28})).sizes(),
            (std::vector<int64_t>{5, 28, 28, 1}));
  m.input_shape = {784};
  EXPECT_EQ(fit_input(m, torch::zeros({5, 1, 28, 28})).sizes(), (std::vector<int64_t>{5, 784}));
  m.input_shape = {-1, 8, 8};
  EXPECT_EQ(fit_input(m, torch::zeros({5, 3, 8, 8})).sizes(), (std::vector<int64_t>{5, 3, 8, 8}));
  m.input_shape = {32, 32, 3};
  const std::string why = error_of([&] { fit_input(m, torch::zeros({5, 3, 32, 32})); });
  EXPECT_NE(why.find("takes samples of shape [32,32,3] (-1: any size), but the data gives "
                     "samples of shape [3,32,32] (the same number of elements in another "
                     "layout, which would need a transpose)"),
            std::string::npos)
      << why;
  m.input_shape = {10};
  EXPECT_NE(error_of([&] { fit_input(m, torch::zeros({5, 11})); }).find("[11]"), std::string::npos);
}

TEST(Partition, BalanceMustCoverTheModel) {
  Model m = chain(10);
  EXPECT_EQ(error_of([&] {
              partition_by_balance(m, {3, 4});
            }),
            "balance 3,4 covers 7 layers but the model has 10 (layers: l0, l1, l2, l3, l4, l5, l6, "
            "l7, l8, l9)");
  EXPECT_NE(error_of([&] {
              partition_by_balance(m, {3, 0, 7});
            }).find("at least one"),
            std::string::npos);
  Partition p = partition_by_balance(m, {3, 4, 3});
  EXPECT_EQ(p.balance(), (std::vector<int>{3, 4, 3}));
  EXPECT_EQ(p.to_string(m), "l0..l2 | l3..l6 | l7..l9");
  EXPECT_EQ(partition_by_balance(m, {1, 9}).layer_range(m, 0), "l0");
}

TEST(Partition, ByParametersBalancesWeight) {
  torch::manual_seed(0);
  models::MlpOptions o;
  o.width = 64;
  o.blocks = 2;
  Model m = models::mlp(o);  // flatten, dense0 (784x64), 4 x (64x64), dropout, logits
  Partition p = partition_by_parameters(m, 2);
  EXPECT_EQ(p.balance(), (std::vector<int>{2, 6}));
  EXPECT_NE(
      error_of([&] { partition_by_parameters(m, 9); }).find("9 stages need at least 9 layers"),
      std::string::npos);
}

TEST(Partition, EvenlyPutsAFreeLayerWithANeighbour) {
  // Costs 0 (a flatten), 4, 2, 2, 4 on 4 stages: the costliest stage is at least 4, and two
  // splits reach it. partition_by_cost keeps the first it finds, the free layer alone
  // (0 | 4 | 4 | 4); the even one joins it to its neighbour (4 | 2 | 2 | 4).
  Model m = chain(5);
  const std::vector<double> costs{0, 4, 2, 2, 4};
  auto cost = [&](int, int b, int e) {
    double sum = 0;
    for (int l = b; l < e; ++l) sum += costs[static_cast<size_t>(l)];
    return sum;
  };
  EXPECT_EQ(partition_by_cost(m, 4, cost).balance(), (std::vector<int>{1, 1, 2, 1}));
  EXPECT_EQ(partition_by_cost_evenly(m, 4, cost).balance(), (std::vector<int>{2, 1, 1, 1}));
  EXPECT_EQ(partition_by_cost_evenly(m, 2, cost).balance(), (std::vector<int>{3, 2}));
  EXPECT_EQ(costliest_stage(partition_by_balance(m, {1, 1, 2, 1}), cost), 4.0);
  EXPECT_EQ(costliest_stage(partition_by_balance(m, {3, 2}), cost), 6.0);
  // A flatten of 0.01 before a layer of 4: alone, it keeps the costliest stage at 4 rather
  // than 4.01, so only a slack lets it join (the least sum of squares then: 4.01 | 2 | 1.5 |
  // 1.5; without, 0.01 | 4 | 2 | 3).
  Model six = chain(6);
  const std::vector<double> mlp{0.01, 4, 1, 1, 1.5, 1.5};
  auto mlp_cost = [&](int, int b, int e) {
    double sum = 0;
    for (int l = b; l < e; ++l) sum += mlp[static_cast<size_t>(l)];
    return sum;
  };
  EXPECT_EQ(partition_by_cost_evenly(six, 4, mlp_cost).balance(), (std::vector<int>{1, 1, 2, 2}));
  EXPECT_EQ(partition_by_cost_evenly(six, 4, mlp_cost, 0.05).balance(),
            (std::vector<int>{2, 2, 1, 1}));
  EXPECT_NE(error_of([&] {
              partition_under_cap(six, 4, mlp_cost, 3.9);
            }).find("no split of model 'chain' into 4 stages keeps every stage's cost within 3.9"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              partition_by_cost_evenly(m, 2, [](int, int, int) { return -1.0; });
            }).find("negative cost"),
            std::string::npos);
}

TEST(Partition, ByPlacementFormsStagesFromRuns) {
  Model m = chain(5);
  std::vector<int> devices;
  Partition p = partition_by_placement(m, {0, 0, 1, 1, 0}, &devices);
  EXPECT_EQ(p.balance(), (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(devices, (std::vector<int>{0, 1, 0}));
  EXPECT_NE(error_of([&] {
              partition_by_placement(m, {0, 1}, nullptr);
            }).find("names 2 devices but the model has 5"),
            std::string::npos);
}

TEST(Flow, SkipsGoDirectlyAndTensorsWithTwoConsumerStages) {
  Model m;
  m.layers = {fn("a", {"input"}, {"x1"}), fn("b", {"x1"}, {"x2"}), fn("c", {"x2"}, {"x3"}),
              fn("d", {"x3", "x1"}, {"x4"}), fn("e", {"x4", "x2"}, {"output"})};
  m.loss = [](const torch::Tensor& o, const torch::Tensor&) { return o.sum(); };
  Flow f = analyze(m, partition_by_balance(m, {1, 1, 1, 2}));
  ASSERT_EQ(f.outputs[0].size(), 2u);
  EXPECT_EQ(f.outputs[0][0].to_stage, 1);
  EXPECT_EQ(f.outputs[0][1].to_stage, 3);
  EXPECT_EQ(f.outputs[0][1].tensor, "x1");
  EXPECT_EQ(f.consumers(), (std::vector<std::vector<int>>{{1, 3}, {2, 3}, {3}, {}}));
  ASSERT_EQ(f.inputs[3].size(), 3u);  // x1 from 0, x2 from 1, x3 from 2
  EXPECT_EQ(f.inputs[0][0].from_stage, -1);
}

TEST(Flow, LossMustBeInTheLastStage) {
  Model m = chain(3);
  m.layers.push_back(fn("after", {"output"}, {"unused"}));
  EXPECT_NE(error_of([&] {
              analyze(m, partition_by_balance(m, {3, 1}));
            }).find("produced in stage 0 but the last stage is 1"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::graph
