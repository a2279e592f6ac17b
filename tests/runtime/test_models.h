// Small models and a one-device reference for the runtime's equivalence tests.
#pragma once

#include <torch/torch.h>

#include "tandem/graph/model.h"
#include "tandem/models/layers.h"
#include "tandem/models/mlp.h"

namespace tandem::testing {

// 4 + 2 * blocks layers: flatten, dense0, block0.dense0, block0.dense1, ..., dropout, logits.
inline graph::Model small_mlp(double dropout = 0.0, uint64_t seed = 7, int blocks = 1) {
  torch::manual_seed(seed);
  models::MlpOptions o;
  o.inputs = 12;
  o.width = 16;
  o.blocks = blocks;
  o.dropout = dropout;
  o.classes = 5;
  return models::mlp(o);
}

// Skips that cross non-adjacent stages and a tensor with two consumer stages:
//   a: input -> x1        b: x1 -> x2        c: x2 -> x3
//   d: x3 + x1 -> x4      e: x4 * x2 -> x5   out: x5 -> output
// With balance 1,1,1,3: x1 goes 0->1 and 0->3, x2 goes 1->2 and 1->3.
inline graph::Model skip_model(uint64_t seed = 11) {
  torch::manual_seed(seed);
  graph::Model m;
  m.name = "skips";
  m.layers.push_back(models::linear_layer("a", 6, 8, true, "input", "x1"));
  m.layers.push_back(models::linear_layer("b", 8, 8, true, "x1", "x2"));
  m.layers.push_back(models::linear_layer("c", 8, 8, true, "x2", "x3"));
  m.layers.push_back(graph::make_function_layer(
      "d", [](const graph::Tensors& t) { return graph::Tensors{t[0] + t[1]}; }, {"x3", "x1"}, {"x4"}));
  m.layers.push_back(graph::make_function_layer(
      "e", [](const graph::Tensors& t) { return graph::Tensors{t[0] * t[1]}; }, {"x4", "x2"}, {"x5"}));
  m.layers.push_back(models::linear_layer("out", 8, 3, false, "x5", "output"));
  m.loss = models::cross_entropy_loss;
  m.metric = models::correct_predictions;
  return m;
}

// The reference: the whole model on one device, the full batch, no pipeline.
inline torch::Tensor reference_forward(const graph::Model& m, const torch::Tensor& input) {
  std::map<std::string, torch::Tensor> env{{m.input, input}};
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    graph::Tensors in;
    for (const auto& n : l.inputs) in.push_back(env.at(n));
    auto out = l.forward(in);
    for (size_t k = 0; k < out.size(); ++k) env[l.outputs[k]] = out[k];
  }
  return env.at(m.output);
}

inline std::vector<std::pair<std::string, torch::Tensor>> all_parameters(const graph::Model& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& l : m.layers) {
    for (auto& p : graph::named_parameters(l)) out.push_back(p);
  }
  return out;
}

}  // namespace tandem::testing
