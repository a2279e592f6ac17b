// A layer: one named module of the model with named input and output tensors.
//
// Any torch::nn module with a single-tensor forward becomes a layer through make_layer();
// anything else (several inputs, several outputs, a plain function) supplies its own forward.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tandem::graph {

using Tensors = std::vector<torch::Tensor>;
// Computes the layer's outputs from its inputs, in the order of Layer::inputs/outputs.
using ForwardFn = std::function<Tensors(const Tensors& inputs)>;
// Makes the forward of a layer over `module`: given a deep copy of the layer's module, the
// forward that computes with the copy instead of the original.
using BindFn = std::function<ForwardFn(const std::shared_ptr<torch::nn::Module>& module)>;

struct Layer {
  std::string name;
  // Owns the parameters and buffers; may be null for a layer without state (concat, flatten).
  std::shared_ptr<torch::nn::Module> module;
  ForwardFn forward;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  // Multiply-adds per sample of one forward, where known (Linear, Conv); 0 when unknown.
  // Used for FLOP/s in reports, never for correctness.
  double forward_flops_per_sample = 0;
  // True when the layer's backward can defer its weight gradient (see deferred.h); layers
  // without a split do all their backward work in the I action.
  bool splits_backward = false;
  // For a layer with a module: how to make the forward of a copy (see copy_layer). Set by
  // make_layer and by tandem's own layers; a hand-filled layer may leave it empty, and then
  // cannot be copied (a spatial split in one process runs one copy per device).
  BindFn bind;
  // The names of the module's parameters and buffers in checkpoints and state dicts, by the
  // module's own key ("p0" -> "e.0.weight"). A key without an entry is "<layer>.<key>" (every
  // built-in model); an entry lets a layer keep the names of the framework it came from (an
  // ONNX initializer, a PyTorch state-dict name), whatever the layer is called.
  std::map<std::string, std::string> state_names;
};

// Wraps a module holder (torch::nn::Linear, torch::nn::Conv3d, ...) whose forward takes one
// tensor and returns one tensor.
template <typename Holder>
Layer make_layer(std::string name, Holder holder, std::string input, std::string output) {
  using Impl = typename Holder::ContainedType;
  Layer l;
  l.name = std::move(name);
  l.module = holder.ptr();
  l.bind = [](const std::shared_ptr<torch::nn::Module>& module) -> ForwardFn {
    Holder h(std::dynamic_pointer_cast<Impl>(module));
    return [h](const Tensors& in) mutable { return Tensors{h->forward(in[0])}; };
  };
  l.forward = l.bind(l.module);
  l.inputs = {std::move(input)};
  l.outputs = {std::move(output)};
  return l;
}

// A layer whose module is a deep copy of `layer.module` (parameters and buffers copied, not
// shared), computing with it; a layer without a module is returned as it is. Throws
// tandem::Error for a layer with a module but no bind, or a module that cannot be cloned
// (torch::nn::Cloneable).
Layer copy_layer(const Layer& layer);

// A layer with no parameters computed by `fn`.
Layer make_function_layer(std::string name, ForwardFn fn, std::vector<std::string> inputs,
                          std::vector<std::string> outputs);

// The name of the module's parameter or buffer `key` in checkpoints and state dicts:
// layer.state_names[key] when given, else "<layer>.<key>".
std::string state_name(const Layer& layer, const std::string& key);
// Parameters and buffers of a layer (empty when it has no module), under their state names, in
// the module's order.
std::vector<std::pair<std::string, torch::Tensor>> named_parameters(const Layer& layer);
std::vector<std::pair<std::string, torch::Tensor>> named_buffers(const Layer& layer);

}  // namespace tandem::graph
