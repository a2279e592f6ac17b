// A spatial split's weights inside one process: each device of a slab group runs its own copy
// of the stage; the group's lead (its first local device) holds the weights the optimizer
// steps. Before a run the others copy the lead's parameters and buffers; after backward the
// lead adds their weight gradients to its own, in slab order, so every run sums them the same
// way. (Across processes the lead's sums then go through the transport's all-reduce, in
// pipeline.cc with the replicas'.)
#include <torch/torch.h>

#include "pipeline_impl.h"

namespace tandem::runtime {

std::vector<torch::Tensor> Pipeline::Impl::device_parameters(int d, int stage) const {
  std::vector<torch::Tensor> params;
  auto [b, e] = partition.layers_of(stage);
  for (int i = b; i < e; ++i) {
    for (auto& p : graph::named_parameters(device_model[d]->layers[i])) params.push_back(p.second);
  }
  return params;
}

namespace {
// Parameters and buffers of layers [b, e) of `m`, in a fixed order.
std::vector<torch::Tensor> state_of(const graph::Model& m, int b, int e) {
  std::vector<torch::Tensor> out;
  for (int i = b; i < e; ++i) {
    if (!m.layers[i].module) continue;
    for (auto& p : m.layers[i].module->parameters()) out.push_back(p);
    for (auto& buf : m.layers[i].module->buffers()) out.push_back(buf);
  }
  return out;
}
}  // namespace

void Pipeline::Impl::mirror_from_lead(int w) {
  const int d = local[w];
  torch::NoGradGuard no_grad;
  for (int s = 0; s < partition.num_stages; ++s) {
    const int l = lead(s);
    if (d / slabs != stage_device[s] || l == d) continue;
    auto [b, e] = partition.layers_of(s);
    auto mine = state_of(*device_model[d], b, e);
    auto theirs = state_of(*device_model[l], b, e);
    for (size_t k = 0; k < mine.size(); ++k) mine[k].copy_(theirs[k]);
  }
}

void Pipeline::Impl::sum_into_lead(int w) {
  const int d = local[w];
  torch::NoGradGuard no_grad;
  for (int s = 0; s < partition.num_stages; ++s) {
    if (lead(s) != d) continue;
    std::vector<torch::Tensor> mine = device_parameters(d, s);
    for (int other : local) {  // ascending: slab order
      if (other == d || other / slabs != stage_device[s]) continue;
      std::vector<torch::Tensor> theirs = device_parameters(other, s);
      for (size_t k = 0; k < mine.size(); ++k) {
        const torch::Tensor& g = theirs[k].grad();
        if (!g.defined()) continue;
        if (!mine[k].grad().defined()) mine[k].mutable_grad() = torch::zeros_like(mine[k]);
        mine[k].mutable_grad().add_(g.to(mine[k].device()));
      }
    }
  }
}

}  // namespace tandem::runtime
