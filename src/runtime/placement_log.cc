#include "tandem/runtime/placement_log.h"

#include <torch/autograd.h>

#include "tandem/memory/context.h"

namespace tandem::runtime {

namespace {

class BackwardProbe : public torch::autograd::Function<BackwardProbe> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               int64_t log, int64_t layer) {
    ctx->saved_data["log"] = log;
    ctx->saved_data["layer"] = layer;
    return x.view_as(x);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto* log =
        reinterpret_cast<PlacementLog*>(static_cast<intptr_t>(ctx->saved_data["log"].toInt()));
    const auto& where = memory::current_where();
    // On a GPU the gradient's own device says where the work ran (on whatever thread); a CPU
    // gradient does not say which CPU device, the worker thread running it does.
    const bool gpu = grads[0].defined() && grads[0].is_cuda();
    log->record_backward(static_cast<int>(ctx->saved_data["layer"].toInt()),
                         gpu || where.device < 0 ? grads[0].device().str() : where.device_name);
    return {grads[0], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void PlacementLog::record_forward(int layer, const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  forward_[layer].insert(device);
}

void PlacementLog::record_backward(int layer, const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  backward_[layer].insert(device);
}

std::map<int, std::set<std::string>> PlacementLog::forward() const {
  std::lock_guard<std::mutex> lock(mu_);
  return forward_;
}

std::map<int, std::set<std::string>> PlacementLog::backward() const {
  std::lock_guard<std::mutex> lock(mu_);
  return backward_;
}

torch::Tensor PlacementLog::probe(const torch::Tensor& t, int layer) {
  if (!t.requires_grad()) return t;
  return BackwardProbe::apply(t, static_cast<int64_t>(reinterpret_cast<intptr_t>(this)),
                              static_cast<int64_t>(layer));
}

}  // namespace tandem::runtime
