#include "tandem/spatial/halo.h"

#include <torch/autograd.h>

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/spatial/group.h"

namespace tandem::spatial {

namespace {

int64_t bytes_of(const torch::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

class HaloExchange : public torch::autograd::Function<HaloExchange> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               int64_t dim, int64_t width) {
    c10::intrusive_ptr<Halo> halo = exchange_halo(x, dim, width);
    torch::Tensor out = halo->around(x);
    halo->before = torch::Tensor();  // the backward needs only the names
    halo->after = torch::Tensor();
    ctx->saved_data["halo"] = c10::IValue::make_capsule(std::move(halo));
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto halo = c10::static_intrusive_pointer_cast<Halo>(ctx->saved_data["halo"].toCapsule());
    return {return_halo_grad(*halo, grads[0]), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor Halo::around(const torch::Tensor& x) const {
  return torch::cat({before, x, after}, dim);
}

c10::intrusive_ptr<Halo> exchange_halo(const torch::Tensor& x, int64_t dim, int64_t width) {
  const graph::CallContext& call = graph::current_call();
  TANDEM_ASSERT(call.group, "a halo exchange outside a spatial split");
  TANDEM_CHECK(dim >= 0 && dim < x.dim(), "a halo along dimension {} of a tensor of shape [{}]",
               dim, fmt::join(x.sizes(), ","));
  TANDEM_CHECK(x.size(dim) >= width,
               "layer {} of stage {}: a slab of {} plane{} along dimension {} cannot lend the {} "
               "halo planes its convolution needs; use fewer slabs (PipelineOptions::slabs) or a "
               "larger volume",
               call.layer, call.stage, x.size(dim), x.size(dim) == 1 ? "" : "s", dim, width);
  Group& g = *call.group;
  auto halo = c10::make_intrusive<Halo>();
  halo->group = &g;
  halo->name = fmt::format("halo L{} #{}{}", call.layer, graph::next_collective_index(),
                           call.recomputing ? " r" : "");
  halo->stage = call.stage;
  halo->microbatch = call.microbatch;
  halo->dim = dim;
  halo->width = width;
  halo->depth = x.size(dim);
  const int j = g.index(), n = g.size();
  const int64_t d = halo->depth;
  Exchange ex{"halo", call.stage, call.microbatch, g.now_us()};
  const transport::MessageKey key = g.key(halo->name, call.stage, call.microbatch, false);
  if (!g.dry() && width > 0) {
    if (j > 0) {
      torch::Tensor low = x.detach().narrow(dim, 0, width).contiguous();
      ex.bytes_sent += bytes_of(low);
      g.send(j - 1, key, low);
    }
    if (j < n - 1) {
      torch::Tensor high = x.detach().narrow(dim, d - width, width).contiguous();
      ex.bytes_sent += bytes_of(high);
      g.send(j + 1, key, high);
    }
  }
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[dim] = width;
  const auto options = x.options().requires_grad(false);
  const bool from_before = j > 0 && !g.dry() && width > 0;
  const bool from_after = j < n - 1 && !g.dry() && width > 0;
  halo->before = from_before ? g.recv(j - 1, key) : torch::zeros(sizes, options);
  halo->after = from_after ? g.recv(j + 1, key) : torch::zeros(sizes, options);
  ex.end_us = g.now_us();
  g.record(std::move(ex));
  return halo;
}

torch::Tensor return_halo_grad(const Halo& h, const torch::Tensor& grad) {
  Group& g = *h.group;
  const int j = g.index(), n = g.size();
  const int64_t dim = h.dim, w = h.width, d = h.depth;
  TANDEM_ASSERT(grad.size(dim) == d + 2 * w, "halo gradient of {} planes for {} + 2 x {}",
                grad.size(dim), d, w);
  Exchange ex{"halo grad", h.stage, h.microbatch, g.now_us()};
  const transport::MessageKey key = g.key(h.name, h.stage, h.microbatch, true);
  const bool to_before = j > 0 && !g.dry() && w > 0;
  const bool to_after = j < n - 1 && !g.dry() && w > 0;
  if (to_before) {
    torch::Tensor low = grad.narrow(dim, 0, w).contiguous();
    ex.bytes_sent += bytes_of(low);
    g.send(j - 1, key, low);
  }
  if (to_after) {
    torch::Tensor high = grad.narrow(dim, d + w, w).contiguous();
    ex.bytes_sent += bytes_of(high);
    g.send(j + 1, key, high);
  }
  torch::Tensor gx = grad.narrow(dim, w, d).clone(at::MemoryFormat::Contiguous);
  if (to_before) gx.narrow(dim, 0, w).add_(g.recv(j - 1, key));
  if (to_after) gx.narrow(dim, d - w, w).add_(g.recv(j + 1, key));
  ex.end_us = g.now_us();
  g.record(std::move(ex));
  return gx;
}

torch::Tensor with_halo(const torch::Tensor& x, int64_t dim, int64_t width) {
  TANDEM_CHECK(dim >= 0 && dim < x.dim(), "a halo along dimension {} of a tensor of shape [{}]",
               dim, fmt::join(x.sizes(), ","));
  TANDEM_CHECK(width >= 0, "a halo of {} planes", width);
  if (!graph::current_call().group) {
    std::vector<int64_t> pad(2 * (x.dim() - dim), 0);
    pad[pad.size() - 2] = width;
    pad[pad.size() - 1] = width;
    return torch::constant_pad_nd(x, pad);
  }
  if (width == 0) return x;
  return HaloExchange::apply(x, dim, width);
}

}  // namespace tandem::spatial
