#include "tandem/models/split_linear.h"

#include <torch/autograd.h>

#include "tandem/graph/call_context.h"
#include "tandem/graph/precision.h"

namespace tandem::models {

namespace {

class SplitLinear : public torch::autograd::Function<SplitLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    ctx->save_for_backward({x, weight, bias});
    ctx->saved_data["deferred"] =
        static_cast<int64_t>(reinterpret_cast<intptr_t>(graph::current_call().deferred));
    return torch::nn::functional::linear(x, weight, bias);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor g = grads[0];
    // In the gradient's type: a forward under autocast saved the fp32 weight (and the model's fp32
    // input) beside its reduced-precision activations (graph/precision.h); `param` is where a
    // deferred weight gradient goes.
    const torch::Tensor param = saved[1], bias = saved[2];
    torch::Tensor x = graph::reduced_to(saved[0], g.scalar_type());
    torch::Tensor weight = graph::reduced_to(param, g.scalar_type());
    // The model's own input (the first layer's x) needs no gradient: skip that product.
    torch::Tensor grad_x = ctx->needs_input_grad(0) ? g.matmul(weight) : torch::Tensor();
    // Flatten leading dimensions: [N, in] and [N, out].
    torch::Tensor x2 = x.reshape({-1, x.size(-1)});
    torch::Tensor g2 = g.reshape({-1, g.size(-1)});
    auto* deferred = reinterpret_cast<graph::DeferredWeightGrads*>(
        static_cast<intptr_t>(ctx->saved_data["deferred"].toInt()));
    if (deferred && deferred->deferring()) {
      deferred->push([x2, g2, param, bias] {
        graph::accumulate_grad(param, g2.t().mm(x2));
        if (bias.defined()) graph::accumulate_grad(bias, g2.sum(0));
      });
      return {grad_x, torch::Tensor(), torch::Tensor()};
    }
    return {grad_x, g2.t().mm(x2), bias.defined() ? g2.sum(0) : torch::Tensor()};
  }
};

}  // namespace

torch::Tensor split_linear(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias) {
  return SplitLinear::apply(x, weight, bias);
}

}  // namespace tandem::models
