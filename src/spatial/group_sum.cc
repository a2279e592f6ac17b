#include "tandem/spatial/group_sum.h"

#include <torch/autograd.h>

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/spatial/group.h"

namespace tandem::spatial {

namespace {

// Adds `mine` and the other slabs' `key` messages in slab order, after sending `mine` to them.
torch::Tensor sum_over_group(Group& g, const transport::MessageKey& key, const torch::Tensor& mine,
                             Exchange ex) {
  for (int k = 0; k < g.size(); ++k) {
    if (k == g.index()) continue;
    g.send(k, key, mine);
    ex.bytes_sent += mine.numel() * static_cast<int64_t>(mine.element_size());
  }
  // Slab order on every slab: the same additions of the same values, the same bits.
  torch::Tensor total;
  for (int k = 0; k < g.size(); ++k) {
    torch::Tensor part = k == g.index() ? mine : g.recv(k, key);
    total = total.defined() ? total + part : part.clone();
  }
  ex.end_us = g.now_us();
  g.record(std::move(ex));
  return total;
}

// Records a dry group's sum of `partial` with the bytes it would send (a measurement times the
// exchanges by them); the sum is the slab's own.
void record_dry_sum(Group& g, const torch::Tensor& partial, Exchange ex) {
  ex.bytes_sent = (g.size() - 1) * partial.numel() * static_cast<int64_t>(partial.element_size());
  ex.end_us = g.now_us();
  g.record(std::move(ex));
}

// What a shared sum's backward needs to find its messages again (autograd may run it on
// another thread, outside the layer's call).
struct SumKey : torch::CustomClassHolder {
  Group* group = nullptr;
  std::string name;
  int stage = 0;
  int microbatch = 0;
};

// The forward of both sums: `partial` added over the current call's group.
torch::Tensor forward_sum(const torch::Tensor& partial, SumKey* key_out) {
  const graph::CallContext& call = graph::current_call();
  Group& g = *call.group;
  const std::string name = fmt::format("sum L{} #{}{}", call.layer, graph::next_collective_index(),
                                       call.recomputing ? " r" : "");
  if (key_out) {
    key_out->group = &g;
    key_out->name = name;
    key_out->stage = call.stage;
    key_out->microbatch = call.microbatch;
  }
  if (g.dry()) {
    record_dry_sum(g, partial, Exchange{"sum", call.stage, call.microbatch, g.now_us()});
    return partial.clone();
  }
  return sum_over_group(g, g.key(name, call.stage, call.microbatch, false),
                        partial.detach().contiguous(),
                        Exchange{"sum", call.stage, call.microbatch, g.now_us()});
}

class GroupSum : public torch::autograd::Function<GroupSum> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& partial) {
    return forward_sum(partial, nullptr);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext*,
                                               torch::autograd::tensor_list grads) {
    return {grads[0]};
  }
};

class SharedSum : public torch::autograd::Function<SharedSum> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& partial) {
    auto key = c10::make_intrusive<SumKey>();
    torch::Tensor total = forward_sum(partial, key.get());
    ctx->saved_data["key"] = c10::IValue::make_capsule(std::move(key));
    return total;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto k = c10::static_intrusive_pointer_cast<SumKey>(ctx->saved_data["key"].toCapsule());
    Group& g = *k->group;
    if (g.dry()) {
      record_dry_sum(g, grads[0], Exchange{"sum grad", k->stage, k->microbatch, g.now_us()});
      return {grads[0]};
    }
    return {sum_over_group(g, g.key(k->name, k->stage, k->microbatch, true), grads[0].contiguous(),
                           Exchange{"sum grad", k->stage, k->microbatch, g.now_us()})};
  }
};

}  // namespace

bool split() { return graph::current_call().group != nullptr; }

torch::Tensor group_sum(const torch::Tensor& partial) {
  if (!split()) return partial;
  return GroupSum::apply(partial);
}

torch::Tensor group_sum_shared(const torch::Tensor& partial) {
  if (!split()) return partial;
  return SharedSum::apply(partial);
}

int64_t whole_extent(const torch::Tensor& t) {
  const Group* g = graph::current_call().group;
  TANDEM_ASSERT(g, "whole_extent outside a spatial split");
  const int dim = g->layout().dim;
  TANDEM_CHECK(dim < t.dim(), "a slab of dimension {} of a tensor of shape [{}]", dim,
               fmt::join(t.sizes(), ","));
  const int64_t local = t.size(dim), slab = g->slab().size;
  TANDEM_CHECK(local > 0 && slab % local == 0 && g->layout().extent % (slab / local) == 0,
               "a tensor of shape [{}] holds {} planes along dimension {}, not the slab's {} "
               "planes scaled by a whole factor",
               fmt::join(t.sizes(), ","), local, dim, slab);
  return g->layout().extent / (slab / local);
}

int64_t whole_elements_per_sample(const torch::Tensor& t) {
  const int64_t per_sample = t.size(0) ? t.numel() / t.size(0) : 0;
  const Group* g = graph::current_call().group;
  if (!g) return per_sample;
  const int64_t local = t.size(g->layout().dim);
  return per_sample / local * whole_extent(t);
}

graph::SampleWindow sample_window(const torch::Tensor& t) {
  const graph::CallContext& call = graph::current_call();
  const Group* g = call.group;
  if (!g) return call.window;
  const int dim = g->layout().dim;
  const int64_t whole = whole_extent(t);
  const int64_t scale = g->layout().extent / whole;
  graph::SampleWindow w;
  w.offsets.assign(static_cast<size_t>(t.dim() - 1), 0);
  w.full_sizes.assign(t.sizes().begin() + 1, t.sizes().end());
  w.offsets[static_cast<size_t>(dim - 1)] = g->slab().offset / scale;
  w.full_sizes[static_cast<size_t>(dim - 1)] = whole;
  return w;
}

}  // namespace tandem::spatial
