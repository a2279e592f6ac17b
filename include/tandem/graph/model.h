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
// What a model predicts, from its output: [B, ...] -> [B, ...].
using PredictionFn = std::function<torch::Tensor(const torch::Tensor& output)>;

struct Model {
  std::string name;
  std::vector<Layer> layers;
  std::string input = "input";
  std::string output = "output";
  LossFn loss;
  MetricFn metric;
  std::string metric_name = "accuracy";
  // The output as what the model predicts (tandem predict): the probabilities of a classifier or
  // a mask where the loss applies the softmax or sigmoid itself (an ONNX graph's final Sigmoid
  // that the loss took over, the MLP's class scores); unset: the output as it is (a U-Net that
  // ends in its sigmoid, a regression).
  PredictionFn prediction;
  // Where a spatial split (--spatial) may cut every sample into slabs: the dimension of the
  // graph input, the target and every tensor between them that holds the volume (2 for
  // [B,C,D,H,W]: depth), or -1 when the model has no volume to cut (an MLP). The layers must
  // be written for slabs: convolutions exchange halos, whole-sample sums go through
  // spatial::group_sum (tandem's own layers and losses do).
  int slab_dim = -1;
  // Every slab's extent along slab_dim is a multiple of this: the product of the model's
  // down-sampling factors (2^(L-1) for a U-Net of L levels), so that pooling and up-sampling
  // never reach across a slab's edge.
  int64_t slab_multiple = 1;
  // Why a spatial split cannot cut this model (an ONNX graph that reshapes the depth: the node
  // and the reason); empty when it can, or when the model has no volume (slab_dim -1).
  std::string slab_refusal;
  // The shape of one sample of the input, without the batch axis, where the model declares
  // one (an ONNX graph does); -1 on an axis of any size. Empty: any shape.
  std::vector<int64_t> input_shape;

  // Index of the layer called `name`, or -1.
  int find_layer(const std::string& name) const;
  int64_t parameter_count() const;
  // Checks that every consumed tensor is produced by an earlier layer or is the graph input,
  // that no tensor is produced twice, that `output` is produced, that layer names and the
  // names of parameters and buffers are unique, and that loss is set. Throws tandem::Error
  // naming the layer and the tensor.
  void validate() const;
};

// A model whose layers are copies (graph::copy_layer): the same values, its own parameters.
Model copy_model(const Model& model);

// A batch of inputs [B, ...] in the model's input_shape: `input` itself when it fits (or the
// model declares none); reshaped (a view) when its samples hold the same elements in a layout
// that differs only by axes of size 1 ([1,28,28] for [28,28,1]) or when the model takes flat
// samples ([1,28,28] for [784]). Throws tandem::Error naming both shapes otherwise (e.g.
// [3,32,32] for [32,32,3], which would need a transpose, not a reshape).
torch::Tensor fit_input(const Model& model, const torch::Tensor& input);

}  // namespace tandem::graph
