// Deferred weight gradients: how a backward splits into I (gradients with respect to a stage's
// inputs, which the previous stage waits for) and W (gradients with respect to its weights,
// which nobody waits for).
//
// During an I action the runtime marks the micro-batch's queue as deferring; layers that can
// split (Linear, Conv) then return only their input gradient from autograd and push the work
// for their weight gradient — with the saved input and the output gradient it needs — onto the
// queue. The W action runs that work. Layers that cannot split do everything in I.
//
// Thread-safety: push() may be called from autograd's threads (CUDA runs backward there);
// the other methods are called by the stage's worker.
#pragma once

#include <torch/types.h>

#include <functional>
#include <mutex>
#include <vector>

namespace tandem::graph {

class DeferredWeightGrads {
 public:
  bool deferring() const { return deferring_; }
  void set_deferring(bool on) { deferring_ = on; }
  void push(std::function<void()> work);
  // Runs every pushed work item in push order, forgetting each (and what it keeps) once it has
  // run.
  void run_all();
  size_t size() const;

 private:
  bool deferring_ = false;
  mutable std::mutex mu_;
  std::vector<std::function<void()>> work_;
};

// Adds `value` to the gradient of leaf `param`, as autograd's accumulation would; for the
// deferred weight-gradient work of splitting layers.
void accumulate_grad(torch::Tensor param, const torch::Tensor& value);
// The same for `value` that is the gradient of indices [first, first + value.size(dim)) of
// `param` along `dim` (zeros elsewhere where `param` has no gradient yet).
void accumulate_grad(torch::Tensor param, const torch::Tensor& value, int64_t dim, int64_t first);

}  // namespace tandem::graph
