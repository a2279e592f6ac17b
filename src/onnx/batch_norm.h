// Batch normalization over micro-batches, as torchgpipe's deferred batch norm does it.
//
// Training: each micro-batch is normalized by its own mean and (biased) variance over the
// batch and spatial axes, as one device normalizes the batch it sees; gradients therefore
// equal those of one device on the whole batch only with one micro-batch. The running
// statistics are not updated per micro-batch: each micro-batch's mean and variance are
// gathered (in float64, combined exactly as one set of samples: Chan et al.'s parallel
// variance) and, once the step's last micro-batch has been seen, the batch's mean and
// unbiased variance update them once, as one device does for the whole batch:
//   running = momentum * running + (1 - momentum) * batch   (ONNX's momentum, PyTorch's 1 - m)
// A micro-batch seen again in the same step (recomputation) is not counted twice. Evaluation
// normalizes by the running statistics.
//
// Shapes: x [B,C,...]; scale, bias, running mean and variance [C].
// Thread-safety: one stage's worker calls forward(); not shared between threads.
#pragma once

#include <torch/types.h>

#include <set>

namespace tandem::onnx::detail {

class DeferredBatchNorm {
 public:
  DeferredBatchNorm(double epsilon, double momentum) : epsilon_(epsilon), momentum_(momentum) {}

  // `batches_tracked` (0-dim int64, may be undefined) counts updates, as PyTorch's
  // num_batches_tracked does. Reads graph::current_call() for training, step and micro-batch.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& scale,
                        const torch::Tensor& bias, torch::Tensor running_mean,
                        torch::Tensor running_var, torch::Tensor batches_tracked);

 private:
  void gather(const torch::Tensor& x);
  void commit(torch::Tensor& running_mean, torch::Tensor& running_var,
              torch::Tensor& batches_tracked);

  double epsilon_, momentum_;
  int64_t step_ = -1;        // the step being gathered
  std::set<int> seen_;       // its micro-batches counted so far
  bool committed_ = false;   // its statistics are in the running ones
  torch::Tensor mean_, m2_;  // [C] float64: mean and sum of squared deviations so far
  double count_ = 0;         // values per channel so far
};

}  // namespace tandem::onnx::detail
