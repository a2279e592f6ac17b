#include "batch_norm.h"

#include "tandem/graph/call_context.h"

namespace tandem::onnx::detail {

torch::Tensor DeferredBatchNorm::forward(const torch::Tensor& x, const torch::Tensor& scale,
                                         const torch::Tensor& bias, torch::Tensor running_mean,
                                         torch::Tensor running_var, torch::Tensor batches_tracked) {
  const graph::CallContext& call = graph::current_call();
  if (!call.training) {
    return torch::batch_norm(x, scale, bias, running_mean, running_var, /*training=*/false, 0.0,
                             epsilon_, /*cudnn_enabled=*/true);
  }
  // Normalized by the micro-batch's own statistics; the running ones are left alone here.
  torch::Tensor y = torch::batch_norm(x, scale, bias, torch::Tensor(), torch::Tensor(),
                                      /*training=*/true, 0.0, epsilon_, /*cudnn_enabled=*/true);
  // microbatches == 0: not a pipeline step (a memory measurement): leave the statistics alone.
  if (call.microbatches <= 0) return y;
  if (call.step != step_) {
    step_ = call.step;
    seen_.clear();
    committed_ = false;
    count_ = 0;
  }
  if (committed_ || !seen_.insert(call.microbatch).second) return y;
  gather(x);
  if (static_cast<int>(seen_.size()) == call.microbatches)
    commit(running_mean, running_var, batches_tracked);
  return y;
}

void DeferredBatchNorm::gather(const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const double n = static_cast<double>(x.numel() / std::max<int64_t>(x.size(1), 1));
  if (n == 0) return;
  auto [var, mean] = torch::var_mean(x, dims, /*unbiased=*/false);
  mean = mean.to(torch::kCPU, torch::kFloat64);
  const torch::Tensor m2 = var.to(torch::kCPU, torch::kFloat64) * n;
  if (count_ == 0) {
    mean_ = mean;
    m2_ = m2;
    count_ = n;
    return;
  }
  const double total = count_ + n;
  const torch::Tensor delta = mean - mean_;
  mean_ = mean_ + delta * (n / total);
  m2_ = m2_ + m2 + delta * delta * (count_ * n / total);
  count_ = total;
}

void DeferredBatchNorm::commit(torch::Tensor& running_mean, torch::Tensor& running_var,
                               torch::Tensor& batches_tracked) {
  committed_ = true;
  if (count_ == 0) return;
  torch::NoGradGuard no_grad;
  const torch::Tensor unbiased = m2_ / std::max(count_ - 1, 1.0);
  const auto device = running_mean.device();
  const auto type = running_mean.scalar_type();
  running_mean.mul_(momentum_).add_(mean_.to(device, type), 1.0 - momentum_);
  running_var.mul_(momentum_).add_(unbiased.to(device, type), 1.0 - momentum_);
  if (batches_tracked.defined()) batches_tracked.add_(1);
}

}  // namespace tandem::onnx::detail
