#include "tandem/spatial/halo_conv.h"

#include <torch/autograd.h>

#include <array>
#include <tuple>

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/deferred.h"
#include "tandem/spatial/forward_chunks.h"
#include "tandem/spatial/halo.h"

namespace tandem::spatial {

namespace {

// What the backward needs besides the saved tensors. Autograd may run the backward on another
// thread, outside the layer's call, so nothing is read from the call context there.
struct HaloConvState : torch::CustomClassHolder {
  c10::intrusive_ptr<Halo> halo;
  std::shared_ptr<const ConvKernels> kernels;
  graph::DeferredWeightGrads* deferred = nullptr;  // null: never defer
  WeightSlice slice;                               // where a deferred weight gradient goes
};

// Planes are numbered as in x with halos: before [0, w), x [w, w + d), after [w + d, d + 2w).
// Output plane o reads planes [o, o + 2w]; plane p is read by outputs [p - 2w, p].

// The two edge pieces, [0, 3w) and [d - w, d + 2w): the planes the w output planes read that
// read one halo.
int64_t edge_begin(const Halo& h, bool low) { return low ? 0 : h.depth - h.width; }
int64_t edge_end(const Halo& h, bool low) { return low ? 3 * h.width : h.depth + 2 * h.width; }

// d(loss)/dy's planes that read the halo below (`low`) or above.
torch::Tensor edge_grad(const Halo& h, const torch::Tensor& grad, bool low) {
  return grad.narrow(kDepthDim, low ? 0 : h.depth - h.width, h.width).contiguous();
}

// d(loss)/dy's planes [lo, hi), zeros where they fall outside [0, d) (outputs of the
// neighbours, whose gradients reach x through their own halos).
torch::Tensor grad_planes(const torch::Tensor& grad, int64_t lo, int64_t hi) {
  const int64_t d = grad.size(kDepthDim);
  const int64_t from = std::max<int64_t>(lo, 0), to = std::min(hi, d);
  if (from == lo && to == hi) return grad.narrow(kDepthDim, lo, hi - lo).contiguous();
  std::vector<int64_t> sizes = grad.sizes().vec();
  sizes[kDepthDim] = hi - lo;
  torch::Tensor out = torch::zeros(sizes, grad.options());
  if (from < to)
    out.narrow(kDepthDim, from - lo, to - from).copy_(grad.narrow(kDepthDim, from, to - from));
  return out;
}

// A tensor of x's type and device with `planes` planes along depth, contiguous, that owns no
// memory of its own: a view of x's storage. It stands for an input whose values an input
// gradient does not read (a convolution's input gradient depends on its input's shape only).
torch::Tensor shape_of(const torch::Tensor& x, int64_t planes) {
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[kDepthDim] = planes;
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * sizes[i + 1];
  TANDEM_ASSERT(planes <= x.size(kDepthDim), "{} planes of a slab of {}", planes,
                x.size(kDepthDim));
  return x.detach().as_strided(sizes, strides, x.storage_offset());
}

// d(loss)/d(planes [lo, hi)): the gradient of the planes' outputs [lo - 2w, hi) through a
// convolution that pads 2w along depth, which maps them onto exactly those planes.
torch::Tensor input_grad_planes(const HaloConvState& s, const torch::Tensor& grad,
                                const torch::Tensor& x, const torch::Tensor& weight, int64_t lo,
                                int64_t hi) {
  const int64_t w = s.halo->width;
  return std::get<0>(s.kernels->backward(grad_planes(grad, lo - 2 * w, hi), shape_of(x, hi - lo),
                                         weight, torch::Tensor(), 2 * w, {true, false, false}));
}

// Elements of one sample's plane along depth, over every channel: C x H x W for [B,C,D,H,W].
double per_plane(const torch::Tensor& t) {
  double n = 1;
  for (int64_t i = 1; i < t.dim(); ++i)
    if (i != kDepthDim) n *= static_cast<double>(t.size(i));
  return n;
}

// A chunk of a pass holds at most half the pass's result in bytes (or one plane): about an
// eighth of the slab's planes (4 of a 32-plane slab), so the workspace above what one device
// holds for the same layer stays small next to the result, which both hold. Measured on unet3d
// at 64³ on 2 slabs (bench/RESULTS.md): a share of 1/8 (chunks of one plane) holds as little
// (51.9 MiB per device) but runs at 1.54x the plain loop instead of 2.1x, since each chunk reads
// its halo again and the kernels work on thin pieces; a share of 1 (8 planes) runs no faster
// and holds 55.7 MiB, which costs 4 devices the 104³ they train under 192 MiB.
constexpr double kChunkShare = 0.5;

// Planes per chunk of a pass that makes a result of `result_per_plane` elements per plane of
// depth and holds `chunk_bytes(c)` elements while it computes a chunk of c planes.
// At least `least` planes (or the slab's).
template <typename F>
int64_t chunk_planes(int64_t depth, double result_per_plane, F chunk_bytes, int64_t least = 1) {
  int64_t c = depth;
  while (c > least && chunk_bytes(c) > kChunkShare * result_per_plane * static_cast<double>(depth))
    --c;
  return c;
}

// y = the convolution of `parts` (slabs of d planes, concatenated along the channels) with
// their halos, chunk by chunk along depth: each chunk reads its planes of every part with halos
// as one piece.
// Planes [lo, hi) of every part with its halos, concatenated along the channels: one tensor
// filled in place, not a copy per part and then their concatenation.
torch::Tensor concatenated_halo_planes(const std::vector<c10::intrusive_ptr<Halo>>& halos,
                                       const std::vector<torch::Tensor>& parts, int64_t lo,
                                       int64_t hi) {
  std::vector<int64_t> sizes = parts.front().sizes().vec();
  sizes[1] = 0;
  for (const torch::Tensor& part : parts) sizes[1] += part.size(1);
  sizes[kDepthDim] = hi - lo;
  torch::Tensor out = torch::empty(sizes, parts.front().options());
  int64_t channel = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Halo& h = *halos[i];
    const int64_t w = h.width, d = h.depth, c = parts[i].size(1);
    torch::Tensor dst = out.narrow(1, channel, c);
    // Numbered as with_halo_planes: before [0, w), x [w, w + d), after [w + d, d + 2w).
    const std::array<std::tuple<const torch::Tensor*, int64_t, int64_t>, 3> sources{
        {{&h.before, 0, w}, {&parts[i], w, w + d}, {&h.after, w + d, d + 2 * w}}};
    for (const auto& [source, begin, end] : sources) {
      const int64_t from = std::max(lo, begin), to = std::min(hi, end);
      if (from < to)
        dst.narrow(kDepthDim, from - lo, to - from)
            .copy_(source->narrow(kDepthDim, from - begin, to - from));
    }
    channel += c;
  }
  return out;
}

// Chunks have at least `least` planes.
torch::Tensor chunked_output(const std::vector<c10::intrusive_ptr<Halo>>& halos,
                             const std::vector<torch::Tensor>& parts, const ConvKernels& kernels,
                             const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t least) {
  const Halo& h = *halos.front();
  const int64_t w = h.width, d = h.depth;
  // A chunk holds its piece (twice, where the kernels copy it into a blocked layout, or where
  // the parts' pieces are concatenated) and its output (twice too; counted with x's plane size,
  // which strides on the other axes only shrink).
  double in = 0;
  for (const torch::Tensor& part : parts) in += per_plane(part);
  const double out = per_plane(parts.front()) / static_cast<double>(parts.front().size(1)) *
                     static_cast<double>(weight.size(0));
  const int64_t chunk = chunk_planes(
      d, out,
      [&](int64_t c) {
        return 2 * in * static_cast<double>(c + 2 * w) + 2 * out * static_cast<double>(c);
      },
      least);
  torch::Tensor y;
  for (int64_t a = 0; a < d; a += chunk) {
    const int64_t b = std::min(d, a + chunk);
    torch::Tensor piece = parts.size() == 1 ? with_halo_planes(h, parts.front(), a, b + 2 * w)
                                            : concatenated_halo_planes(halos, parts, a, b + 2 * w);
    torch::Tensor part = kernels.forward(piece, weight, bias, 0);
    piece = torch::Tensor();
    TANDEM_ASSERT(part.size(kDepthDim) == b - a, "a halo convolution of {} planes gave {}", b - a,
                  part.size(kDepthDim));
    if (b - a == d) return part;
    if (!y.defined()) {
      std::vector<int64_t> sizes = part.sizes().vec();
      sizes[kDepthDim] = d;
      y = torch::empty(sizes, part.options());
    }
    y.narrow(kDepthDim, a, b - a).copy_(part);
  }
  return y;
}

// y = the convolution of x with halos, chunk by chunk along depth.
torch::Tensor output(const HaloConvState& s, const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  return chunked_output({s.halo}, {x}, *s.kernels, weight, bias, 1);
}

// d(loss)/dx [B,C,d,...], chunk by chunk.
torch::Tensor input_grad(const HaloConvState& s, const torch::Tensor& grad, const torch::Tensor& x,
                         const torch::Tensor& weight) {
  const int64_t w = s.halo->width, d = s.halo->depth;
  // A chunk holds the gradient of its outputs and its own input gradient, twice where the
  // kernels compute in a blocked layout and copy out.
  const double in = per_plane(x), out = per_plane(grad);
  const int64_t chunk = chunk_planes(d, in, [&](int64_t c) {
    return out * static_cast<double>(c + 2 * w) + 2 * in * static_cast<double>(c);
  });
  if (chunk >= d) return input_grad_planes(s, grad, x, weight, w, w + d);
  torch::Tensor gx = torch::empty_like(x, at::MemoryFormat::Contiguous);
  for (int64_t a = 0; a < d; a += chunk) {
    const int64_t b = std::min(d, a + chunk);
    gx.narrow(kDepthDim, a, b - a).copy_(input_grad_planes(s, grad, x, weight, w + a, w + b));
  }
  return gx;
}

// The weight (and bias) gradients: the zero-padded convolution's, plus the terms of each halo
// from its edge piece with only the halo's planes in it. Refetches the halos and releases them.
std::pair<torch::Tensor, torch::Tensor> weight_grads(const HaloConvState& s,
                                                     const torch::Tensor& grad,
                                                     const torch::Tensor& x,
                                                     const torch::Tensor& weight,
                                                     const torch::Tensor& bias) {
  Halo& h = *s.halo;
  refetch_halo(h, x);
  auto [unused, gw, gb] =
      s.kernels->backward(grad, x, weight, bias, h.width, {false, true, bias.defined()});
  if (h.width > 0) {
    // Both edge pieces in one call, as a batch of twice the samples: a piece of one output plane
    // per sample would take LibTorch's slow path on the CPU alone (models/depth_fold.h).
    std::vector<torch::Tensor> pieces, grads;
    for (bool low : {true, false}) {
      const Parts only_halo{low, false, !low};
      pieces.push_back(with_halo_planes(h, x, edge_begin(h, low), edge_end(h, low), only_halo));
      grads.push_back(edge_grad(h, grad, low));
    }
    auto [gx_edge, gw_edge, gb_edge] =
        s.kernels->backward(torch::cat(grads, 0), torch::cat(pieces, 0), weight, torch::Tensor(), 0,
                            {false, true, false});
    gw.add_(gw_edge);
  }
  h.before = torch::Tensor();
  h.after = torch::Tensor();
  h.sent.clear();
  return {gw, gb};
}

// d(loss)/dx with the neighbours' gradients of x's boundary planes added, after sending them
// the gradients of their planes.
torch::Tensor input_grad_with_halos(const HaloConvState& s, const torch::Tensor& grad,
                                    const torch::Tensor& x, const torch::Tensor& weight) {
  const int64_t w = s.halo->width, d = s.halo->depth;
  torch::Tensor gx = input_grad(s, grad, x, weight);
  if (w == 0) return gx;
  const torch::Tensor before = input_grad_planes(s, grad, x, weight, 0, w);
  const torch::Tensor after = input_grad_planes(s, grad, x, weight, w + d, d + 2 * w);
  return_halo_grads(*s.halo, before, after, gx);
  return gx;
}

class HaloConv : public torch::autograd::Function<HaloConv> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias_or_none, int64_t width,
                               std::shared_ptr<const ConvKernels> kernels, bool may_defer,
                               WeightSlice slice) {
    // An optional, not an undefined tensor: autograd's apply takes every tensor argument as an
    // input that has a device.
    const torch::Tensor bias = bias_or_none.value_or(torch::Tensor());
    ctx->save_for_backward({x, weight, bias});
    auto state = c10::make_intrusive<HaloConvState>();
    state->halo = exchange_halo(x, kDepthDim, width);
    state->kernels = std::move(kernels);
    state->deferred = may_defer ? graph::current_call().deferred : nullptr;
    state->slice = std::move(slice);
    torch::Tensor y = output(*state, x, weight, bias);
    state->halo->before = torch::Tensor();  // refetched when a backward needs them
    state->halo->after = torch::Tensor();
    state->halo->sent.clear();
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor x = saved[0], weight = saved[1], bias = saved[2];
    auto state =
        c10::static_intrusive_pointer_cast<HaloConvState>(ctx->saved_data["state"].toCapsule());
    const torch::Tensor g = grads[0].contiguous();
    // The model's own input (the first layer's x) needs no gradient. Every slab of a group runs
    // the same graph, so then none of them exchanges halo gradients.
    const bool needs_x = ctx->needs_input_grad(0);
    const torch::Tensor none;
    if (state->deferred && state->deferred->deferring()) {
      torch::Tensor gx = needs_x ? input_grad_with_halos(*state, g, x, weight) : none;
      state->deferred->push([state, g, x, weight, bias] {
        auto [gw, gb] = weight_grads(*state, g, x, weight, bias);
        if (state->slice.whole.defined())
          graph::accumulate_grad(state->slice.whole, gw, /*dim=*/1, state->slice.first);
        else
          graph::accumulate_grad(weight, gw);
        if (bias.defined()) graph::accumulate_grad(bias, gb);
      });
      return {gx, none, none, none, none, none, none};
    }
    // The weight gradient first: its pass holds little, and d(loss)/dx not yet.
    auto [gw, gb] = weight_grads(*state, g, x, weight, bias);
    torch::Tensor gx = needs_x ? input_grad_with_halos(*state, g, x, weight) : none;
    return {gx, gw, bias.defined() ? gb : none, none, none, none, none};
  }
};

}  // namespace

torch::Tensor halo_conv(const torch::Tensor& x, const torch::Tensor& weight,
                        const torch::Tensor& bias, int64_t width,
                        std::shared_ptr<const ConvKernels> kernels, bool may_defer,
                        WeightSlice slice) {
  TANDEM_ASSERT(graph::current_call().group, "a halo convolution outside a spatial split");
  TANDEM_ASSERT(width >= 0, "a halo convolution of width {}", width);
  TANDEM_ASSERT(kernels, "a halo convolution without kernels");
  return HaloConv::apply(x, weight,
                         bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt, width,
                         std::move(kernels), may_defer, std::move(slice));
}

torch::Tensor halo_conv_forward(const std::vector<torch::Tensor>& parts,
                                const torch::Tensor& weight, const torch::Tensor& bias,
                                int64_t width, const ConvKernels& kernels) {
  TANDEM_ASSERT(graph::current_call().group, "a halo convolution outside a spatial split");
  TANDEM_ASSERT(!parts.empty() && width >= 0, "a halo convolution of {} parts, width {}",
                parts.size(), width);
  std::vector<c10::intrusive_ptr<Halo>> halos;
  for (const torch::Tensor& part : parts) halos.push_back(exchange_halo(part, kDepthDim, width));
  // Two planes at least: a single sample's convolution of one output plane takes LibTorch's
  // im2col path on the CPU, whose columns (27 x the input channels per output voxel) outweigh a
  // thin slab's whole output (models/depth_fold.h folds two planes or more into a batch).
  torch::Tensor y = chunked_output(halos, parts, kernels, weight, bias, 2);
  for (auto& h : halos) {
    h->before = torch::Tensor();
    h->after = torch::Tensor();
    h->sent.clear();
  }
  return y;
}

}  // namespace tandem::spatial
