// Building blocks for models: layers that need tandem's call context.
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include "tandem/graph/layer.h"

namespace tandem::models {

// Dropout whose mask is keyed by (seed, step, layer) and drawn per sample and element
// (keyed_dropout_mask with graph::current_call's key, sample_offset and window), so a sample
// gets the same mask under any schedule, partition, device count, micro-batch count and
// replica count, and a recomputed forward draws the mask of the original one. The mask is
// drawn on the CPU and moved to the tensor's device, so every device type gives the same mask.
class KeyedDropoutImpl : public torch::nn::Cloneable<KeyedDropoutImpl> {
 public:
  explicit KeyedDropoutImpl(double p);
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x);
  double p() const { return p_; }

 private:
  double p_;
};
TORCH_MODULE(KeyedDropout);

// Layer helpers. Shapes in the comments: B batch.
graph::Layer flatten_layer(std::string name, std::string input,
                           std::string output);  // [B,...] -> [B,N]
graph::Layer relu_layer(std::string name, std::string input, std::string output);
graph::Layer dropout_layer(std::string name, double p, std::string input, std::string output);
// Linear (+ optional relu) with its FLOPs recorded; with relu, He-initialized (normal, fan-in)
// with zero bias. Its backward splits into input and weight gradients (split_linear.h).
graph::Layer linear_layer(std::string name, int64_t in, int64_t out, bool relu, std::string input,
                          std::string output);

}  // namespace tandem::models
