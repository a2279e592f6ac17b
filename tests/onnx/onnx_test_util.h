// Helpers of the ONNX tests: where the fixtures are (made by fixtures.py before the tests run)
// and a plain forward through a model's layers, in order, on one device.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "tandem/checkpoint/state_dict.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/model.h"

namespace tandem::testing {

inline std::string fixture(const std::string& name) {
  return std::string(TANDEM_ONNX_FIXTURES) + "/" + name;
}

inline std::map<std::string, torch::Tensor> load_pt(const std::string& name) {
  return checkpoint::load_state_dict_file(fixture(name));
}

// Runs every layer of `model` on `input` as one micro-batch outside a pipeline step and returns
// the tensor the loss reads.
inline torch::Tensor run_forward(const graph::Model& model, const torch::Tensor& input,
                                 bool training) {
  std::map<std::string, torch::Tensor> env{{model.input, graph::fit_input(model, input)}};
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const graph::Layer& layer = model.layers[i];
    graph::CallContext call;
    call.layer = static_cast<int>(i);
    call.training = training;
    graph::ScopedCall scoped(call);
    graph::Tensors in;
    for (const auto& name : layer.inputs) in.push_back(env.at(name));
    graph::Tensors out = layer.forward(in);
    for (size_t k = 0; k < out.size(); ++k) env[layer.outputs[k]] = out[k];
  }
  return env.at(model.output);
}

// Largest |a - b| relative to the largest |b| (1 for all-zero b).
inline double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-30);
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>() / scale;
}

}  // namespace tandem::testing
