// A model: an ordered list of layers over named tensors, plus the loss.
//
// Tensor names are the graph's edges: a layer may consume any tensor produced by an earlier
// layer or any graph input, so skip connections are just names used later. A tensor may have
// several consumers. The graph inputs come from the batch (`input`); the loss reads the tensor
// named `output` and the batch's target.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "tandem/graph/layer.h"

namespace tandem::graph {

// Mean loss over one micro-batch: (output [B,...], target [B,...]) -> scalar.
using LossFn = std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)>;
// Sum over the samples of a micro-batch of a quality score (correct predictions, Dice, ...);
// the runtime divides the total by the number of samples.
using MetricFn = std::function<double(const torch::Tensor& output, const torch::Tensor& target)>;

struct Model {
  std::string name;
  std::vector<Layer> layers;
  std::string input = "input";
  std::string output = "output";
  LossFn loss;
  MetricFn metric;
  std::string metric_name = "accuracy";

  // Index of the layer called `name`, or -1.
  int find_layer(const std::string& name) const;
  int64_t parameter_count() const;
  // Checks that every consumed tensor is produced by an earlier layer or is the graph input,
  // that no tensor is produced twice, that `output` is produced, that layer names are unique
  // and that loss is set. Throws tandem::Error naming the layer and the tensor.
  void validate() const;
};

}  // namespace tandem::graph
