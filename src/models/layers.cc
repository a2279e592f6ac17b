#include "tandem/models/layers.h"

#include <torch/nn/modules/linear.h>

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/models/keyed_dropout.h"
#include "tandem/models/split_linear.h"
#include "tandem/spatial/group_sum.h"

namespace tandem::models {

KeyedDropoutImpl::KeyedDropoutImpl(double p) : p_(p) {
  TANDEM_CHECK(p >= 0 && p < 1, "dropout probability must be in [0, 1), not {}", p);
}

torch::Tensor KeyedDropoutImpl::forward(const torch::Tensor& x) {
  const auto& call = graph::current_call();
  if (!call.training || p_ == 0) return x;
  torch::Tensor keep =
      keyed_dropout_mask(call.random_key(), call.sample_offset, x.sizes(), 1.0 - p_,
                         spatial::sample_window(x));
  return x * keep.to(x.options());
}

graph::Layer flatten_layer(std::string name, std::string input, std::string output) {
  return graph::make_function_layer(
      std::move(name), [](const graph::Tensors& in) { return graph::Tensors{in[0].flatten(1)}; },
      {std::move(input)}, {std::move(output)});
}

graph::Layer relu_layer(std::string name, std::string input, std::string output) {
  return graph::make_function_layer(
      std::move(name), [](const graph::Tensors& in) { return graph::Tensors{torch::relu(in[0])}; },
      {std::move(input)}, {std::move(output)});
}

graph::Layer dropout_layer(std::string name, double p, std::string input, std::string output) {
  return graph::make_layer(std::move(name), KeyedDropout(p), std::move(input), std::move(output));
}

graph::Layer linear_layer(std::string name, int64_t in, int64_t out, bool relu, std::string input,
                          std::string output) {
  torch::nn::Linear lin(in, out);
  if (relu) {
    // He initialization for layers followed by relu: keeps activations' scale through depth.
    torch::NoGradGuard no_grad;
    torch::nn::init::kaiming_normal_(lin->weight, 0.0, torch::kFanIn, torch::kReLU);
    lin->bias.zero_();
  }
  graph::Layer l;
  l.name = std::move(name);
  l.module = lin.ptr();
  l.bind = [relu](const std::shared_ptr<torch::nn::Module>& module) -> graph::ForwardFn {
    torch::nn::Linear lin(std::dynamic_pointer_cast<torch::nn::LinearImpl>(module));
    return [lin, relu](const graph::Tensors& x) {
      torch::Tensor y = split_linear(x[0], lin->weight, lin->bias);
      return graph::Tensors{relu ? torch::relu(y) : y};
    };
  };
  l.forward = l.bind(l.module);
  l.splits_backward = true;
  l.inputs = {std::move(input)};
  l.outputs = {std::move(output)};
  l.forward_flops_per_sample = 2.0 * static_cast<double>(in) * static_cast<double>(out);
  return l;
}

}  // namespace tandem::models
