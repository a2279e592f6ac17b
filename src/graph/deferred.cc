#include "tandem/graph/deferred.h"

#include <torch/torch.h>

namespace tandem::graph {

void DeferredWeightGrads::push(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mu_);
  work_.push_back(std::move(work));
}

void DeferredWeightGrads::run_all() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(work_);
  }
  for (auto& w : work) {
    w();
    w = nullptr;  // what it kept (an input, a gradient) goes before the next one runs
  }
}

size_t DeferredWeightGrads::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return work_.size();
}

void accumulate_grad(torch::Tensor param, const torch::Tensor& value) {
  torch::NoGradGuard no_grad;
  if (param.grad().defined()) {
    param.mutable_grad().add_(value);
  } else {
    // In the parameter's type (fp32) where a reduced-precision backward computed it.
    param.mutable_grad() = value.to(param.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
  }
}

void accumulate_grad(torch::Tensor param, const torch::Tensor& value, int64_t dim, int64_t first) {
  torch::NoGradGuard no_grad;
  if (!param.grad().defined()) param.mutable_grad() = torch::zeros_like(param);
  param.mutable_grad().narrow(dim, first, value.size(dim)).add_(value);
}

}  // namespace tandem::graph
