#include "tandem/models/split_conv.h"

#include <ATen/ops/convolution_backward.h>
#include <torch/autograd.h>

#include "tandem/graph/call_context.h"
#include "tandem/models/depth_fold.h"

namespace tandem::models {

namespace {

// The three gradients of a stride-1 convolution, as selected by `mask` (input, weight, bias).
// A single sample that DepthFold takes goes through the backward as its two slabs.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> conv_grads(
    const torch::Tensor& g, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
    int64_t padding, std::array<bool, 3> mask) {
  std::vector<int64_t> bias_sizes{w.size(0)};
  auto backward = [&](const torch::Tensor& grad, const torch::Tensor& input, at::IntArrayRef pad) {
    return at::convolution_backward(
        grad, input, w, b.defined() ? at::OptionalIntArrayRef(bias_sizes) : c10::nullopt, {1, 1, 1},
        pad, {1, 1, 1}, false, {0, 0, 0}, 1, {mask[0], mask[1], mask[2] && b.defined()});
  };
  if (auto fold = DepthFold::of(x, w, padding)) {
    auto [gx, gw, gb] = backward(fold->split(g), fold->slabs(x), fold->slab_padding());
    return {mask[0] ? fold->add_slabs(gx) : gx, gw, gb};
  }
  return backward(g, x, {padding, padding, padding});
}

class SplitConv3d : public torch::autograd::Function<SplitConv3d> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias_or_none, int64_t padding) {
    // An optional, not an undefined tensor: autograd's apply takes every tensor argument as an
    // input that has a device.
    const torch::Tensor bias = bias_or_none.value_or(torch::Tensor());
    ctx->save_for_backward({x, weight, bias});
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["deferred"] =
        static_cast<int64_t>(reinterpret_cast<intptr_t>(graph::current_call().deferred));
    if (auto fold = DepthFold::of(x, weight, padding))
      return fold->join(torch::conv3d(fold->slabs(x), weight, bias, 1, fold->slab_padding()));
    return torch::conv3d(x, weight, bias, 1, padding);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor x = saved[0], weight = saved[1], bias = saved[2];
    const int64_t padding = ctx->saved_data["padding"].toInt();
    torch::Tensor g = grads[0].contiguous();
    auto* deferred = reinterpret_cast<graph::DeferredWeightGrads*>(
        static_cast<intptr_t>(ctx->saved_data["deferred"].toInt()));
    // The model's own input (the first layer's x) needs no gradient: skip computing it.
    const bool input_grad = ctx->needs_input_grad(0);
    if (deferred && deferred->deferring()) {
      torch::Tensor grad_x =
          input_grad ? std::get<0>(conv_grads(g, x, weight, bias, padding, {true, false, false}))
                     : torch::Tensor();
      deferred->push([g, x, weight, bias, padding] {
        auto [gx, gw, gb] = conv_grads(g, x, weight, bias, padding, {false, true, true});
        graph::accumulate_grad(weight, gw);
        if (bias.defined()) graph::accumulate_grad(bias, gb);
      });
      return {grad_x, torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    auto [gx, gw, gb] = conv_grads(g, x, weight, bias, padding, {input_grad, true, true});
    return {gx, gw, gb, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor split_conv3d(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, int64_t padding) {
  return SplitConv3d::apply(
      x, weight, bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt, padding);
}

}  // namespace tandem::models
