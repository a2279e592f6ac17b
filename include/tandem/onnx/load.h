// A model from an ONNX file (what torch.onnx.export and tf2onnx write), as a graph::Model that
// trains like a built-in one: on any partition, schedule, device and rank count.
//
// Every node becomes a layer over its named tensors (skip connections are tensors read later,
// as in any tandem model). Initializers become the layers' state under their own names, which
// for a PyTorch export are the module's state-dict names ("e.0.weight"):
//   - trained parameters: the weights and biases of Conv, ConvTranspose, Gemm and MatMul (a
//     MatMul's bias is the constant operand of the Add that follows it), PRelu's slope, the
//     scale and bias of BatchNormalization, InstanceNormalization and LayerNormalization (and
//     of the Mul and Add after a normalization, as PyTorch writes GroupNorm and, before opset
//     17, LayerNorm); also through parameter-free operators between the initializer and its
//     use (Transpose, Unsqueeze, ...), which then run inside the layer that uses it;
//   - buffers: BatchNormalization's running mean and variance (updated in training, used in
//     evaluation; see batch_norm.h for micro-batches), plus a "<prefix>num_batches_tracked"
//     counter where the mean is called "<prefix>running_mean", as PyTorch's module has;
//   - everything else stays a constant; nodes that read only constants are computed once here.
// Nodes that the chosen output does not depend on are left out.
//
// Refused (tandem::Error naming the node, its operator and the supported operators): any
// operator outside supported_operators(), an opset of the default domain outside 11..17, a
// second graph input, a shape tandem cannot resolve before running (a Reshape, Pad or Resize
// whose shape comes from values computed at run time; an axis 0 that is not the batch), tied
// weights (one initializer used by two layers), and outputs tandem does not compute
// (BatchNormalization's running statistics, MaxPool's indices).
//
// Shapes: the graph's input is [B, ...] with B the (micro-)batch, whatever the exported batch
// size; Model::input_shape holds its other axes (-1 where symbolic). A channels-last graph
// (tf2onnx's Keras models: a Transpose to channels-first after the input, one back before the
// output) is fed and read channels-first: those two Transposes are taken over, and
// Model::input, input_shape and output are the tensors between them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tandem/graph/model.h"

namespace tandem::onnx {

struct LoadOptions {
  // The loss (losses() lists them). A Softmax or LogSoftmax over the classes at the end of the
  // graph is taken over by cross-entropy, a Sigmoid by dice and dice+bce: the loss reads the
  // scores before it and applies log-softmax or sigmoid itself (numerically stable), and the
  // metric sees the same probabilities the graph would give.
  std::string loss = "cross-entropy";
  // The graph output the loss reads; empty: the graph's only output.
  std::string output;
};

graph::Model load(const std::string& path, const LoadOptions& options = {});

// Whether the graph takes samples of a given shape, asked of ONNX's shape inference of the
// graph at those sizes. The file is read once; the weights' values are not kept (inference
// needs their shapes only).
class SampleSizes {
 public:
  SampleSizes(const std::string& path, const LoadOptions& options);
  ~SampleSizes();
  SampleSizes(const SampleSizes&) = delete;
  SampleSizes& operator=(const SampleSizes&) = delete;

  // Why the graph cannot take samples of shape `sample` (the axes after the batch, as tandem
  // feeds them: channels first): the first node inference stops at ("ONNX node '/Concat'
  // (Concat): Can't merge shape info. ... Source=15 Target=14 Dimension=2"). Empty when it
  // can, when the graph's sizes are all fixed (graph::fit_input checks those), or when
  // inference cannot follow the graph even as declared.
  std::string refusal(const std::vector<int64_t>& sample) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The operators load() accepts, sorted; the losses LoadOptions::loss accepts.
std::vector<std::string> supported_operators();
std::vector<std::string> losses();

}  // namespace tandem::onnx
