#include "tandem/models/relu.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <memory>
#include <string>

namespace tandem::models {
namespace {

// Whether `grad` is the only tensor that can reach its memory: one reference to it, and its storage
// held by it alone or, for a view (a view made in a backward keeps its base), by it and its base,
// which nothing else holds.
bool only_holder(const torch::Tensor& grad) {
  if (grad.use_count() != 1) return false;
  if (!grad.is_view()) return grad.storage().use_count() == 1;
  const at::TensorBase& base = grad._base();
  return base.use_count() == 1 && !base.is_view() && grad.storage().use_count() == 2;
}

// A raw autograd node, not a torch::autograd::Function: the engine hands a node its incoming
// gradients by move, so a gradient that no other edge, buffer or view holds has one reference
// here, and may be overwritten (as LibTorch's AccumulateGrad steals such a gradient).
class ReluBackwardInPlace final : public torch::autograd::Node {
 public:
  torch::autograd::SavedVariable result;

  std::string name() const override { return "tandem::ReluBackwardInPlace"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    torch::Tensor grad = std::move(grads.at(0));
    if (!grad.defined()) return {torch::Tensor()};
    const torch::Tensor y = result.unpack(shared_from_this());
    if (!torch::autograd::GradMode::is_enabled() && !grad.requires_grad() &&
        grad.layout() == torch::kStrided && grad.sizes() == y.sizes() &&
        grad.scalar_type() == y.scalar_type() && grad.is_non_overlapping_and_dense() &&
        only_holder(grad)) {
      at::threshold_backward_out(grad, grad, y, 0);
      return {grad};
    }
    return {at::threshold_backward(grad, y, 0)};
  }

  void release_variables() override { result.reset_data(); }
};

}  // namespace

torch::Tensor relu_in_place_with_gradient_in_place(torch::Tensor z) {
  if (!torch::autograd::GradMode::is_enabled() || !z.requires_grad()) return torch::relu_(z);
  std::shared_ptr<ReluBackwardInPlace> node(new ReluBackwardInPlace(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(z));
  // The result shares z's memory and version counter: z's own node (the convolution's) keeps
  // its input, not z, so nothing saved is overwritten.
  torch::Tensor y = z.detach();
  {
    at::NoGradGuard no_grad;
    y.relu_();
  }
  torch::autograd::set_history(y, node);
  node->result = torch::autograd::SavedVariable(y, /*is_output=*/true);
  return y;
}

}  // namespace tandem::models
