#include "tandem/spatial/halo_conv.h"

#include <torch/autograd.h>

#include <array>
#include <tuple>

#include "halo_terms.h"
#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/deferred.h"
#include "tandem/graph/precision.h"
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
  double bound = 0;  // the call's workspace bound (graph::CallContext::workspace_bound)
};

// Planes are numbered as in x with halos: before [0, w), x [w, w + d), after [w + d, d + 2w).
// Output plane o reads planes [o, o + 2w]; plane p is read by outputs [p - 2w, p].

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

// Forward only (halo_conv_forward), a chunk holds at most half the pass's result in bytes: about
// an eighth of the slab's planes (4 of a 32-plane slab), as whole samples run forward-only
// convolutions in chunks (forward_chunks.h), so that a slab's forward holds per voxel what one
// device's holds.
constexpr double kForwardChunkShare = 0.5;

// Planes per chunk of a pass over a slab of `depth` planes that holds `chunk_bytes(c)` bytes
// while it computes a chunk of c planes: the most whose bytes stay within `bound` (0: no bound,
// the whole slab), `least` at the least (or the slab's).
template <typename F>
int64_t chunk_planes(int64_t depth, double bound, F chunk_bytes, int64_t least) {
  if (bound <= 0) return depth;
  int64_t c = depth;
  while (c > least && chunk_bytes(c) > bound) --c;
  return c;
}

// Bytes of one element of t.
double element_bytes(const torch::Tensor& t) { return static_cast<double>(t.element_size()); }

// Whether a slab's two edges have a neighbour (halo planes of real values): none at the
// volume's ends.
std::array<bool, 2> neighbours(const Halo& h) {
  return {h.group->index() > 0, h.group->index() < h.group->size() - 1};
}

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

// Planes per chunk of the forward of `parts` (slabs of d planes with halos of `width`) whose
// chunks hold at most `bound` bytes (0: the whole slab).
int64_t output_chunk(const std::vector<torch::Tensor>& parts, const torch::Tensor& weight,
                     int64_t width, double bound, int64_t least) {
  // A chunk holds its piece (twice, where the kernels copy it into a blocked layout, or where
  // the parts' pieces are concatenated) and its output (twice too; counted with x's plane size,
  // which strides on the other axes only shrink).
  double in = 0;
  for (const torch::Tensor& part : parts) in += per_plane(part);
  const double out = per_plane(parts.front()) / static_cast<double>(parts.front().size(1)) *
                     static_cast<double>(weight.size(0));
  const double bytes = element_bytes(parts.front());
  return chunk_planes(
      parts.front().size(kDepthDim), bound,
      [&](int64_t c) {
        return bytes *
               (2 * in * static_cast<double>(c + 2 * width) + 2 * out * static_cast<double>(c));
      },
      least);
}

// y = the convolution of `parts` (slabs of d planes, concatenated along the channels) with their
// halos, in chunks of `chunk` planes along depth: each chunk reads its planes of every part with
// halos as one piece.
torch::Tensor chunked_output(const std::vector<c10::intrusive_ptr<Halo>>& halos,
                             const std::vector<torch::Tensor>& parts, const ConvKernels& kernels,
                             const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t chunk) {
  const Halo& h = *halos.front();
  const int64_t w = h.width, d = h.depth;
  torch::Tensor y;
  for (int64_t a = 0; a < d; a += chunk) {
    const int64_t b = std::min(d, a + chunk);
    torch::Tensor piece = parts.size() == 1 ? with_halo_planes(h, parts.front(), a, b + 2 * w)
                                            : concatenated_halo_planes(halos, parts, a, b + 2 * w);
    torch::Tensor part = kernels.forward(std::move(piece), weight, bias, 0);
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

// y = the convolution of x with halos. Whole: x's convolution with zero planes for padding (one
// device's), plus the halos' terms of the edge planes (halo_terms); no copy of x with halos. Under
// a bound, chunk by chunk along depth.
torch::Tensor output(const HaloConvState& s, const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  const Halo& h = *s.halo;
  const int64_t w = h.width, d = h.depth;
  const int64_t chunk = output_chunk({x}, weight, w, s.bound, s.kernels->least_planes());
  if (chunk < d) return chunked_output({s.halo}, {x}, *s.kernels, weight, bias, chunk);
  torch::Tensor y = s.kernels->forward(x, weight, bias, w);
  if (w == 0) return y;
  const std::array<bool, 2> real = neighbours(h);
  if (!real[0] && !real[1]) return y;
  const auto [low, high] = halo_terms(*s.kernels, h, x, weight);
  if (real[0]) y.narrow(kDepthDim, 0, w).add_(low);
  if (real[1]) y.narrow(kDepthDim, d - w, w).add_(high);
  return y;
}

// The input gradient's pass over planes of c: chunks of this many planes (d: whole).
int64_t input_grad_chunk(const HaloConvState& s, const torch::Tensor& grad,
                         const torch::Tensor& x) {
  const int64_t w = s.halo->width, d = s.halo->depth;
  // A chunk holds the gradient of its outputs and its own input gradient, twice where the
  // kernels compute in a blocked layout and copy out.
  const double in = per_plane(x), out = per_plane(grad), bytes = element_bytes(x);
  return chunk_planes(
      d, s.bound,
      [&](int64_t c) {
        return bytes * (out * static_cast<double>(c + 2 * w) + 2 * in * static_cast<double>(c));
      },
      s.kernels->least_planes());
}

// d(loss)/dx [B,C,d,...] from this slab's outputs: whole, x's own convolution's input gradient;
// under a bound, chunk by chunk.
torch::Tensor input_grad(const HaloConvState& s, const torch::Tensor& grad, const torch::Tensor& x,
                         const torch::Tensor& weight) {
  const int64_t w = s.halo->width, d = s.halo->depth;
  const int64_t chunk = input_grad_chunk(s, grad, x);
  if (chunk >= d)
    return std::get<0>(
        s.kernels->backward(grad, x, weight, torch::Tensor(), w, {true, false, false}));
  torch::Tensor gx = torch::empty_like(x, at::MemoryFormat::Contiguous);
  for (int64_t a = 0; a < d; a += chunk) {
    const int64_t b = std::min(d, a + chunk);
    gx.narrow(kDepthDim, a, b - a).copy_(input_grad_planes(s, grad, x, weight, w + a, w + b));
  }
  return gx;
}

// Drops the halo planes (refetched when a backward needs them).
void release(Halo& h) {
  h.before = torch::Tensor();
  h.after = torch::Tensor();
  h.sent.clear();
}

// d(loss)/dx with the neighbours' gradients of x's boundary planes added, after sending them
// the gradients of their planes.
torch::Tensor input_grad_with_halos(const HaloConvState& s, const torch::Tensor& grad,
                                    const torch::Tensor& x, const torch::Tensor& weight) {
  const int64_t w = s.halo->width, d = s.halo->depth;
  torch::Tensor gx = input_grad(s, grad, x, weight);
  if (w == 0) return gx;
  if (input_grad_chunk(s, grad, x) >= d) {
    // The halos' gradients, which do not read the halos' values.
    const auto [before, after] = halo_grads(*s.kernels, *s.halo, grad, x, weight, true, nullptr);
    return_halo_grads(*s.halo, before, after, gx);
    return gx;
  }
  const torch::Tensor before = input_grad_planes(s, grad, x, weight, 0, w);
  const torch::Tensor after = input_grad_planes(s, grad, x, weight, w + d, d + 2 * w);
  return_halo_grads(*s.halo, before, after, gx);
  return gx;
}

// All three gradients of a whole pass in one call each for the slab and for its halos (one
// device's pass, plus the halos' terms: halo_grads). Refetches the halos and releases them.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> whole_grads(
    const HaloConvState& s, const torch::Tensor& grad, const torch::Tensor& x,
    const torch::Tensor& weight, const torch::Tensor& bias, bool needs_x) {
  Halo& h = *s.halo;
  refetch_halo(h, x);
  auto [gx, gw, gb] =
      s.kernels->backward(grad, x, weight, bias, h.width, {needs_x, true, bias.defined()});
  if (h.width > 0) {
    const auto [before, after] = halo_grads(*s.kernels, h, grad, x, weight, needs_x, &gw);
    if (needs_x) return_halo_grads(h, before, after, gx);
  }
  release(h);
  return {gx, gw, gb};
}

// A tensor of the shape and type of `parts` concatenated along the channels, holding nothing (one
// element, expanded): for what reads only x's shape (chunk sizes, halo_grads).
torch::Tensor shape_of(const std::vector<torch::Tensor>& parts) {
  std::vector<int64_t> sizes = parts.front().sizes().vec();
  sizes[1] = 0;
  for (const torch::Tensor& part : parts) sizes[1] += part.size(1);
  return torch::zeros({1}, parts.front().options()).expand(sizes);
}

// whole_grads of x given as `parts` concatenated along the channels, part by part: each part's
// input and weight gradients with its channels of the weight, written into x's gradient, the
// bias's once; the halos' terms as for x. Under a reduced precision oneDNN copies its input into a
// blocked layout; the concatenation beside that copy is what set the slabs' bf16 peak.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> whole_grads_by_part(
    const HaloConvState& s, const torch::Tensor& grad, const std::vector<torch::Tensor>& parts,
    const torch::Tensor& shape, const torch::Tensor& weight, const torch::Tensor& bias,
    bool needs_x) {
  Halo& h = *s.halo;
  refetch_halo(h, parts);
  torch::Tensor gx =
      needs_x ? torch::empty(shape.sizes(), parts.front().options()) : torch::Tensor();
  std::vector<torch::Tensor> gws;
  torch::Tensor gb;
  int64_t first = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t c = parts[i].size(1);
    const bool with_bias = i == 0 && bias.defined();
    auto [gxi, gwi, gbi] = s.kernels->backward(grad, parts[i], weight.narrow(1, first, c),
                                               with_bias ? bias : torch::Tensor(), h.width,
                                               {needs_x, true, with_bias});
    if (needs_x) gx.narrow(1, first, c).copy_(gxi);
    gws.push_back(gwi);
    if (with_bias) gb = gbi;
    first += c;
  }
  torch::Tensor gw = torch::cat(gws, 1);
  if (h.width > 0) {
    const auto [before, after] = halo_grads(*s.kernels, h, grad, shape, weight, needs_x, &gw);
    if (needs_x) return_halo_grads(h, before, after, gx);
  }
  release(h);
  return {gx, gw, gb};
}

// The weight (and bias) gradients alone: the zero-padded convolution's, plus the halos' terms.
// Refetches the halos and releases them.
std::pair<torch::Tensor, torch::Tensor> weight_grads(const HaloConvState& s,
                                                     const torch::Tensor& grad,
                                                     const torch::Tensor& x,
                                                     const torch::Tensor& weight,
                                                     const torch::Tensor& bias) {
  auto [unused, gw, gb] = whole_grads(s, grad, x, weight, bias, /*needs_x=*/false);
  return {gw, gb};
}

class HaloConv : public torch::autograd::Function<HaloConv> {
 public:
  // `parts`: x, or the parts whose concatenation along the channels is x (kept as they are; the
  // concatenation is made for a moment in each pass).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, at::TensorList parts,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias_or_none, int64_t width,
                               std::shared_ptr<const ConvKernels> kernels, bool may_defer,
                               WeightSlice slice) {
    // An optional, not an undefined tensor: autograd's apply takes every tensor argument as an
    // input that has a device.
    const torch::Tensor bias = bias_or_none.value_or(torch::Tensor());
    std::vector<torch::Tensor> kept(parts.begin(), parts.end());
    kept.push_back(weight);
    kept.push_back(bias);
    ctx->save_for_backward(kept);
    const torch::Tensor x = concatenated(parts);
    auto state = c10::make_intrusive<HaloConvState>();
    state->halo = exchange_halo(x, kDepthDim, width);
    state->kernels = std::move(kernels);
    state->deferred = may_defer ? graph::current_call().deferred : nullptr;
    state->slice = std::move(slice);
    state->bound = static_cast<double>(graph::current_call().workspace_bound);
    torch::Tensor y = output(*state, x, weight, bias);
    release(*state->halo);  // refetched when a backward needs them
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const size_t n = saved.size() - 2;
    auto state =
        c10::static_intrusive_pointer_cast<HaloConvState>(ctx->saved_data["state"].toCapsule());
    const torch::Tensor g = grads[0].contiguous();
    // In the gradient's type: a forward under autocast saved fp32 weights (and the model's fp32
    // input) beside its reduced-precision activations (graph/precision.h). Every slab casts
    // alike, so the halos fetched again match.
    std::vector<torch::Tensor> parts(saved.begin(), saved.begin() + static_cast<long>(n));
    for (torch::Tensor& part : parts) part = graph::reduced_to(part, g.scalar_type());
    // `param`: where a deferred weight gradient goes; `weight`: what the passes compute with.
    const torch::Tensor param = saved[n], bias = saved[n + 1];
    const torch::Tensor weight = graph::reduced_to(param, g.scalar_type());
    // The model's own input (the first layer's x) needs no gradient. Every slab of a group runs
    // the same graph, so then none of them exchanges halo gradients.
    bool needs_x = false;
    for (size_t i = 0; i < n; ++i) needs_x = needs_x || ctx->needs_input_grad(i);
    const torch::Tensor none;
    // The parts' gradients, then the weight's and the bias's, then none for the other arguments.
    auto result = [&](const torch::Tensor& gx, const torch::Tensor& gw, const torch::Tensor& gb) {
      torch::autograd::tensor_list out =
          needs_x ? part_grads(gx, parts) : torch::autograd::tensor_list(n);
      out.insert(out.end(), {gw, bias.defined() ? gb : none, none, none, none, none});
      return out;
    };
    const bool deferring = state->deferred && state->deferred->deferring();
    if (parts.size() > 1 && g.scalar_type() != torch::kFloat && !deferring) {
      // A reduced precision: part by part where the pass is whole (fp32 keeps the one
      // convolution of the concatenation, faster there).
      const torch::Tensor shape = shape_of(parts);
      if (input_grad_chunk(*state, g, shape) >= state->halo->depth) {
        auto [gx, gw, gb] = whole_grads_by_part(*state, g, parts, shape, weight, bias, needs_x);
        return result(gx, gw, gb);
      }
    }
    torch::Tensor x = concatenated(parts);
    if (deferring) {
      torch::Tensor gx = needs_x ? input_grad_with_halos(*state, g, x, weight) : none;
      x = torch::Tensor();
      state->deferred->push([state, g, parts, weight, param, bias] {
        auto [gw, gb] = weight_grads(*state, g, concatenated(parts), weight, bias);
        if (state->slice.whole.defined())
          graph::accumulate_grad(state->slice.whole, gw, /*dim=*/1, state->slice.first);
        else
          graph::accumulate_grad(param, gw);
        if (bias.defined()) graph::accumulate_grad(bias, gb);
      });
      return result(gx, none, none);
    }
    if (input_grad_chunk(*state, g, x) >= state->halo->depth) {
      auto [gx, gw, gb] = whole_grads(*state, g, x, weight, bias, needs_x);
      return result(gx, gw, gb);
    }
    // Under a bound, the weight gradient first: its pass holds little, and d(loss)/dx not yet.
    auto [gw, gb] = weight_grads(*state, g, x, weight, bias);
    torch::Tensor gx = needs_x ? input_grad_with_halos(*state, g, x, weight) : none;
    return result(gx, gw, gb);
  }
};

}  // namespace

torch::Tensor concatenated(at::TensorList parts) {
  return parts.size() == 1 ? parts[0] : torch::cat(parts, 1);
}

std::vector<torch::Tensor> part_grads(const torch::Tensor& grad, at::TensorList parts) {
  if (parts.size() == 1) return {grad};
  std::vector<torch::Tensor> out;
  int64_t first = 0;
  for (const torch::Tensor& part : parts) {
    out.push_back(grad.narrow(1, first, part.size(1)));
    first += part.size(1);
  }
  return out;
}

torch::Tensor halo_conv(at::TensorList parts, const torch::Tensor& weight,
                        const torch::Tensor& bias, int64_t width,
                        std::shared_ptr<const ConvKernels> kernels, bool may_defer,
                        WeightSlice slice) {
  TANDEM_ASSERT(graph::current_call().group, "a halo convolution outside a spatial split");
  TANDEM_ASSERT(width >= 0, "a halo convolution of width {}", width);
  TANDEM_ASSERT(kernels, "a halo convolution without kernels");
  TANDEM_ASSERT(!parts.empty(), "a halo convolution of no parts");
  // Forward only (tandem predict, an evaluation): no autograd, halo_conv_forward's chunks.
  if (!torch::GradMode::is_enabled())
    return halo_conv_forward(parts.vec(), weight, bias, width, *kernels);
  return HaloConv::apply(parts, weight,
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
  // Chunks of at most half the result (kForwardChunkShare), whatever the bound.
  const torch::Tensor& x = parts.front();
  const double result = per_plane(x) / static_cast<double>(x.size(1)) *
                        static_cast<double>(weight.size(0)) *
                        static_cast<double>(x.size(kDepthDim)) * element_bytes(x);
  const int64_t chunk =
      output_chunk(parts, weight, width, kForwardChunkShare * result, kernels.least_planes());
  torch::Tensor y = chunked_output(halos, parts, kernels, weight, bias, chunk);
  for (auto& h : halos) release(*h);
  return y;
}

}  // namespace tandem::spatial
