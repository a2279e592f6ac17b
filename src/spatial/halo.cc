#include "tandem/spatial/halo.h"

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/spatial/group.h"

namespace tandem::spatial {

namespace {

int64_t bytes_of(const torch::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

// Sends x's first `width` planes to the previous slab and its last to the next under `key`,
// and fills halo.before and halo.after with theirs (zeros at the volume's ends, and for a dry
// group everywhere). `forward`: the forward's exchange, whose planes the group counts.
void swap_planes(Halo& h, const torch::Tensor& x, const transport::MessageKey& key,
                 const char* kind, bool forward) {
  Group& g = *h.group;
  const int j = g.index(), n = g.size();
  const int64_t dim = h.dim, w = h.width;
  if (w == 0) return;  // a kernel without reach along `dim`: nothing to exchange
  Exchange ex{kind, h.stage, h.microbatch, g.now_us()};
  const bool from_before = j > 0 && !g.dry() && w > 0;
  const bool from_after = j < n - 1 && !g.dry() && w > 0;
  // What goes to a neighbour is a copy of its planes, held until the neighbour takes it; a dry
  // group keeps its copies with the halo instead, so that a measurement counts them.
  h.sent.clear();
  // A dry group records the bytes it would send (a measurement times the exchanges by them).
  if (j > 0) {
    torch::Tensor low = x.detach().narrow(dim, 0, w).contiguous();
    ex.bytes_sent += bytes_of(low);
    if (g.dry())
      h.sent.push_back(low);
    else
      g.send(j - 1, key, low);
  }
  if (j < n - 1) {
    torch::Tensor high = x.detach().narrow(dim, x.size(dim) - w, w).contiguous();
    ex.bytes_sent += bytes_of(high);
    if (g.dry())
      h.sent.push_back(high);
    else
      g.send(j + 1, key, high);
  }
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[dim] = w;
  const auto options = x.options().requires_grad(false);
  h.before = from_before ? g.recv(j - 1, key) : torch::zeros(sizes, options);
  h.after = from_after ? g.recv(j + 1, key) : torch::zeros(sizes, options);
  if (forward) g.add_halo_bytes(bytes_of(h.before) + bytes_of(h.after));
  ex.end_us = g.now_us();
  g.record(std::move(ex));
}

}  // namespace

c10::intrusive_ptr<Halo> exchange_halo(const torch::Tensor& x, int64_t dim, int64_t width) {
  const graph::CallContext& call = graph::current_call();
  TANDEM_ASSERT(call.group, "a halo exchange outside a spatial split");
  TANDEM_CHECK(dim >= 0 && dim < x.dim(), "a halo along dimension {} of a tensor of shape [{}]",
               dim, fmt::join(x.sizes(), ","));
  TANDEM_CHECK(width >= 0, "a halo of {} planes", width);
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
  swap_planes(*halo, x, g.key(halo->name, call.stage, call.microbatch, false), "halo",
              /*forward=*/true);
  return halo;
}

void refetch_halo(Halo& h, const torch::Tensor& x) {
  TANDEM_ASSERT(x.size(h.dim) == h.depth, "halo of a slab of {} planes refetched for {}", h.depth,
                x.size(h.dim));
  Group& g = *h.group;
  swap_planes(h, x, g.key(h.name + " again", h.stage, h.microbatch, false), "halo again",
              /*forward=*/false);
}

void refetch_halo(Halo& h, at::TensorList parts) {
  if (parts.size() == 1) return refetch_halo(h, parts[0]);
  const int64_t w = h.width, d = h.depth;
  for (const torch::Tensor& part : parts)
    TANDEM_ASSERT(part.size(h.dim) == d, "halo of a slab of {} planes refetched for {}", d,
                  part.size(h.dim));
  if (w == 0) return;
  // What swap_planes reads of x: its first w planes and its last w (all of x where they meet).
  std::vector<torch::Tensor> edges;
  for (const torch::Tensor& part : parts)
    edges.push_back(2 * w < d ? torch::cat({part.detach().narrow(h.dim, 0, w),
                                            part.detach().narrow(h.dim, d - w, w)},
                                           h.dim)
                              : part.detach());
  Group& g = *h.group;
  swap_planes(h, torch::cat(edges, 1), g.key(h.name + " again", h.stage, h.microbatch, false),
              "halo again", /*forward=*/false);
}

void return_halo_grads(const Halo& h, const torch::Tensor& grad_before,
                       const torch::Tensor& grad_after, torch::Tensor& grad_x) {
  Group& g = *h.group;
  const int j = g.index(), n = g.size();
  const int64_t dim = h.dim, w = h.width, d = h.depth;
  TANDEM_ASSERT(grad_x.size(dim) == d, "gradient of {} planes for a slab of {}", grad_x.size(dim),
                d);
  Exchange ex{"halo grad", h.stage, h.microbatch, g.now_us()};
  const transport::MessageKey key = g.key(h.name, h.stage, h.microbatch, true);
  const bool to_before = j > 0 && !g.dry() && w > 0;
  const bool to_after = j < n - 1 && !g.dry() && w > 0;
  // Copies for the neighbours, made in a dry group too (a measurement counts them while the
  // gradients are added).
  torch::Tensor low, high;
  if (j > 0 && w > 0) low = grad_before.contiguous();
  if (j < n - 1 && w > 0) high = grad_after.contiguous();
  // A dry group records the bytes it would send, as in swap_planes.
  if (low.defined()) ex.bytes_sent += bytes_of(low);
  if (high.defined()) ex.bytes_sent += bytes_of(high);
  if (to_before) g.send(j - 1, key, low);
  if (to_after) g.send(j + 1, key, high);
  if (to_before) grad_x.narrow(dim, 0, w).add_(g.recv(j - 1, key));
  if (to_after) grad_x.narrow(dim, d - w, w).add_(g.recv(j + 1, key));
  ex.end_us = g.now_us();
  g.record(std::move(ex));
}

torch::Tensor with_halo_planes(const Halo& h, const torch::Tensor& x, int64_t lo, int64_t hi,
                               Parts real) {
  const int64_t w = h.width, d = h.depth, dim = h.dim;
  TANDEM_ASSERT(0 <= lo && lo < hi && hi <= d + 2 * w, "planes [{}, {}) of {} + 2 x {}", lo, hi, d,
                w);
  std::vector<torch::Tensor> pieces;
  // Each part's planes [begin, end) in the numbering of x with halos.
  auto take = [&](const torch::Tensor& part, int64_t begin, int64_t end, bool is_real) {
    const int64_t from = std::max(lo, begin), to = std::min(hi, end);
    if (from >= to) return;
    if (is_real) {
      pieces.push_back(part.detach().narrow(dim, from - begin, to - from));
    } else {
      std::vector<int64_t> sizes = x.sizes().vec();
      sizes[dim] = to - from;
      pieces.push_back(torch::zeros(sizes, x.options().requires_grad(false)));
    }
  };
  TANDEM_ASSERT(w == 0 || !real.before || h.before.defined(), "halo {} has no planes before",
                h.name);
  TANDEM_ASSERT(w == 0 || !real.after || h.after.defined(), "halo {} has no planes after", h.name);
  take(h.before, 0, w, real.before);
  take(x, w, w + d, real.x);
  take(h.after, w + d, d + 2 * w, real.after);
  return pieces.size() == 1 ? pieces[0].contiguous() : torch::cat(pieces, dim);
}

}  // namespace tandem::spatial
