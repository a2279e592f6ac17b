#include "tandem/models/split_conv.h"

#include <ATen/ops/convolution_backward.h>
#include <torch/autograd.h>

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/precision.h"
#include "tandem/models/depth_fold.h"
#include "tandem/spatial/forward_chunks.h"
#include "tandem/spatial/group.h"
#include "tandem/spatial/halo_conv.h"

namespace tandem::models {

namespace {

// Depth is dimension 2 of [B,C,D,H,W]: where a spatial split cuts the volume.
constexpr int64_t kDepth = 2;

// The convolution's padding: `depth` before and after along depth, `other` on the other sides.
struct Padding {
  int64_t depth;
  int64_t other;
  std::vector<int64_t> sizes() const { return {depth, other, other}; }
};

// `x` by value: where the fold copies it into its two slabs, x is dropped before the convolution
// runs (a chunk's piece moved in is then never held beside its slabs and oneDNN's copy of them).
// `groups`: a grouped convolution (never folded), for a slab's halo terms (spatial/halo_conv.cc).
torch::Tensor conv_forward(torch::Tensor x, const torch::Tensor& w, const torch::Tensor& b,
                           Padding pad, int64_t groups = 1) {
  if (groups != 1) return torch::conv3d(x, w, b, 1, pad.sizes(), 1, groups);
  if (auto fold = DepthFold::of(x, w, pad.depth, pad.other)) {
    torch::Tensor slabs = fold->slabs(x);
    x = torch::Tensor();
    return fold->join(torch::conv3d(slabs, w, b, 1, fold->slab_padding()));
  }
  return torch::conv3d(x, w, b, 1, pad.sizes());
}

// The three gradients of a stride-1 convolution, as selected by `mask` (input, weight, bias).
// A single sample that DepthFold takes goes through the backward as its two slabs.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> conv_grads(
    const torch::Tensor& g, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
    Padding pad, std::array<bool, 3> mask, int64_t groups = 1) {
  std::vector<int64_t> bias_sizes{w.size(0)};
  auto backward = [&](const torch::Tensor& grad, const torch::Tensor& input, at::IntArrayRef p) {
    return at::convolution_backward(
        grad, input, w, b.defined() ? at::OptionalIntArrayRef(bias_sizes) : c10::nullopt, {1, 1, 1},
        p, {1, 1, 1}, false, {0, 0, 0}, groups, {mask[0], mask[1], mask[2] && b.defined()});
  };
  if (groups != 1) return backward(g, x, pad.sizes());
  if (auto fold = DepthFold::of(x, w, pad.depth, pad.other)) {
    auto [gx, gw, gb] = backward(fold->split(g), fold->slabs(x), fold->slab_padding());
    return {mask[0] ? fold->add_slabs(gx) : gx, gw, gb};
  }
  return backward(g, x, pad.sizes());
}

// conv_grads of the concatenation of `parts` along the channels, computed part by part: each
// part's input gradient from its channels of the weight, the weight's gradient channels from each
// part, the bias's once. Under a reduced precision oneDNN copies its input into a blocked layout,
// and the concatenation held beside that copy made the U-Net's bf16 peak at 64^3 (the first
// decoder convolution's backward): 80 MiB of workspace there against 64 for a convolution of
// half the channels. `grads`: the parts' input gradients where mask[0], else left empty.
std::pair<torch::Tensor, torch::Tensor> conv_grads_by_part(const torch::Tensor& g,
                                                           const std::vector<torch::Tensor>& parts,
                                                           const torch::Tensor& w,
                                                           const torch::Tensor& b, Padding pad,
                                                           std::array<bool, 3> mask,
                                                           std::vector<torch::Tensor>* grads) {
  std::vector<torch::Tensor> gws;
  torch::Tensor gb;
  int64_t first = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t c = parts[i].size(1);
    auto [gx, gw, gbi] =
        conv_grads(g, parts[i], w.narrow(1, first, c), i == 0 ? b : torch::Tensor(), pad,
                   {mask[0], mask[1], mask[2] && i == 0});
    if (mask[0]) grads->push_back(gx);
    if (mask[1]) gws.push_back(gw);
    if (i == 0) gb = gbi;
    first += c;
  }
  return {mask[1] ? torch::cat(gws, 1) : torch::Tensor(), gb};
}

// Whether conv_grads_by_part computes the gradients of `parts`: several parts in a reduced
// precision (fp32 keeps one convolution of their concatenation, which is faster there).
bool by_part(const std::vector<torch::Tensor>& parts, const torch::Tensor& g) {
  return parts.size() > 1 && g.scalar_type() != torch::kFloat;
}

// The convolution of whole samples: the whole volume's padding along depth. Its backward splits
// into I and W actions when the micro-batch's queue is deferring. `parts`: x, or the parts whose
// concatenation along the channels is x (kept as they are; each pass concatenates them for a
// moment).
class SplitConv3d : public torch::autograd::Function<SplitConv3d> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, at::TensorList parts,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias_or_none, int64_t padding,
                               const spatial::WeightSlice& slice) {
    // An optional, not an undefined tensor: autograd's apply takes every tensor argument as an
    // input that has a device.
    const torch::Tensor bias = bias_or_none.value_or(torch::Tensor());
    std::vector<torch::Tensor> kept(parts.begin(), parts.end());
    kept.push_back(weight);
    kept.push_back(bias);
    ctx->save_for_backward(kept);
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["slice_first"] = slice.first;
    if (slice.whole.defined()) ctx->saved_data["slice_whole"] = slice.whole;
    ctx->saved_data["deferred"] =
        static_cast<int64_t>(reinterpret_cast<intptr_t>(graph::current_call().deferred));
    return conv_forward(spatial::concatenated(parts), weight, bias, {padding, padding});
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const size_t n = saved.size() - 2;
    torch::Tensor g = grads[0].contiguous();
    // In the gradient's type: a forward under autocast saved fp32 weights (and the model's fp32
    // input) beside its reduced-precision activations (graph/precision.h).
    std::vector<torch::Tensor> parts(saved.begin(), saved.begin() + static_cast<long>(n));
    for (torch::Tensor& part : parts) part = graph::reduced_to(part, g.scalar_type());
    // `param`: where a deferred weight gradient goes; `weight`: what the passes compute with.
    const torch::Tensor param = saved[n], bias = saved[n + 1];
    const torch::Tensor weight = graph::reduced_to(param, g.scalar_type());
    const int64_t padding = ctx->saved_data["padding"].toInt();
    auto* deferred = reinterpret_cast<graph::DeferredWeightGrads*>(
        static_cast<intptr_t>(ctx->saved_data["deferred"].toInt()));
    const Padding pad{padding, padding};
    // The model's own input (the first layer's x) needs no gradient: skip computing it.
    bool input_grad = false;
    for (size_t i = 0; i < n; ++i) input_grad = input_grad || ctx->needs_input_grad(i);
    const torch::Tensor none;
    // The parts' gradients, then the weight's and the bias's, then none for the other arguments.
    auto result = [&](const torch::Tensor& gx, const torch::Tensor& gw, const torch::Tensor& gb) {
      torch::autograd::tensor_list out =
          input_grad ? spatial::part_grads(gx, parts) : torch::autograd::tensor_list(n);
      out.insert(out.end(), {gw, gb, none, none});
      return out;
    };
    // The same with the parts' gradients given one by one (none: no input gradient).
    auto by_parts = [&](std::vector<torch::Tensor> grads, const torch::Tensor& gw,
                        const torch::Tensor& gb) {
      if (grads.empty()) grads.resize(n);
      grads.insert(grads.end(), {gw, gb, none, none});
      return torch::autograd::tensor_list(std::move(grads));
    };
    const bool split_parts = by_part(parts, g);
    if (deferred && deferred->deferring()) {
      spatial::WeightSlice slice;
      slice.first = ctx->saved_data["slice_first"].toInt();
      if (ctx->saved_data.count("slice_whole"))
        slice.whole = ctx->saved_data["slice_whole"].toTensor();
      std::vector<torch::Tensor> part_grads;
      torch::Tensor grad_x;
      if (input_grad && split_parts)
        conv_grads_by_part(g, parts, weight, bias, pad, {true, false, false}, &part_grads);
      else if (input_grad)
        grad_x = std::get<0>(
            conv_grads(g, spatial::concatenated(parts), weight, bias, pad, {true, false, false}));
      deferred->push([g, parts, weight, param, bias, pad, slice, split_parts] {
        torch::Tensor gw, gb;
        if (split_parts)
          std::tie(gw, gb) =
              conv_grads_by_part(g, parts, weight, bias, pad, {false, true, true}, nullptr);
        else
          std::tie(std::ignore, gw, gb) =
              conv_grads(g, spatial::concatenated(parts), weight, bias, pad, {false, true, true});
        if (slice.whole.defined())
          graph::accumulate_grad(slice.whole, gw, /*dim=*/1, slice.first);
        else
          graph::accumulate_grad(param, gw);
        if (bias.defined()) graph::accumulate_grad(bias, gb);
      });
      return split_parts ? by_parts(part_grads, none, none) : result(grad_x, none, none);
    }
    if (split_parts) {
      std::vector<torch::Tensor> part_grads;
      auto [gw, gb] =
          conv_grads_by_part(g, parts, weight, bias, pad, {input_grad, true, true}, &part_grads);
      return by_parts(part_grads, gw, gb);
    }
    auto [gx, gw, gb] =
        conv_grads(g, spatial::concatenated(parts), weight, bias, pad, {input_grad, true, true});
    return result(gx, gw, gb);
  }
};

// The same convolution for a slab's halo convolution (spatial/halo_conv.h): `depth_padding`
// along depth, the layer's padding on the other sides.
class FoldedKernels : public spatial::ConvKernels {
 public:
  explicit FoldedKernels(int64_t padding) : padding_(padding) {}
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& weight, const torch::Tensor& bias,
                        int64_t depth_padding, int64_t groups) const override {
    return conv_forward(std::move(x), weight, bias, {depth_padding, padding_}, groups);
  }
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> backward(
      const torch::Tensor& grad, const torch::Tensor& x, const torch::Tensor& weight,
      const torch::Tensor& bias, int64_t depth_padding, std::array<bool, 3> mask,
      int64_t groups) const override {
    return conv_grads(grad, x, weight, bias, {depth_padding, padding_}, mask, groups);
  }
  // Two: a single sample's convolution of one output plane takes LibTorch's im2col path on the
  // CPU (2.5-15x slower per plane than oneDNN's, and its columns outweigh a thin slab's output),
  // where two planes or more go through DepthFold as a batch.
  int64_t least_planes() const override { return 2; }

 private:
  int64_t padding_;
};

// Whether the convolution of `x`-shaped input runs in chunks: forward only, whole samples, an
// output of at least kForwardChunkBytes, a kernel as deep as its padding allows.
bool chunked(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding) {
  return x.dim() == 5 && weight.size(2) == 2 * padding + 1 && x.size(kDepth) > 1 &&
         spatial::chunks_forward(x.size(0) * weight.size(0) * x.size(2) * x.size(3) * x.size(4) *
                                 static_cast<int64_t>(x.element_size()));
}

// The convolution of `parts` concatenated, chunk by chunk (spatial/forward_chunks.h).
torch::Tensor in_chunks(const std::vector<torch::Tensor>& parts, const torch::Tensor& weight,
                        const torch::Tensor& bias, int64_t padding) {
  return spatial::conv_in_chunks(parts, padding, [&](torch::Tensor x) {
    return conv_forward(std::move(x), weight, bias, {0, padding});
  });
}

// An optional, not an undefined tensor, for autograd's apply (see SplitConv3d::forward).
c10::optional<torch::Tensor> optional(const torch::Tensor& t) {
  return t.defined() ? c10::optional<torch::Tensor>(t) : c10::nullopt;
}

// The convolution of a slab (of x, or of the concatenation of the parts `x`): the neighbours'
// planes stand in for the padding along depth, and under a workspace bound the passes run in
// chunks of planes. `slice`: where `weight` lies in the layer's parameter.
torch::Tensor slab_conv(const spatial::Group& g, at::TensorList x, const torch::Tensor& weight,
                        const torch::Tensor& bias, int64_t padding, spatial::WeightSlice slice) {
  TANDEM_CHECK(g.layout().dim == kDepth && x.front().dim() == 5,
               "a Conv3d layer splits [B,C,D,H,W] volumes along depth (dimension {}), but the "
               "spatial split cuts dimension {} of a tensor of shape [{}]",
               kDepth, g.layout().dim, fmt::join(x.front().sizes(), ","));
  return spatial::halo_conv(x, weight, bias, padding, std::make_shared<FoldedKernels>(padding),
                            /*may_defer=*/true, std::move(slice));
}

// Forward only on a slab (tandem predict): the convolution runs as spatial::halo_conv_forward.
bool slab_forward(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding) {
  return !torch::GradMode::is_enabled() && graph::current_call().group && x.dim() == 5 &&
         weight.size(2) == 2 * padding + 1;
}

}  // namespace

torch::Tensor split_conv3d_concat(const std::vector<torch::Tensor>& parts,
                                  const torch::Tensor& weight, const torch::Tensor& bias,
                                  int64_t padding) {
  if (chunked(parts.front(), weight, padding)) return in_chunks(parts, weight, bias, padding);
  // Forward only on a slab: the parts' chunks concatenated, as whole samples run (a full
  // output per part and their sum would hold twice the output).
  if (slab_forward(parts.front(), weight, padding))
    return spatial::halo_conv_forward(parts, weight, bias, padding, FoldedKernels(padding));
  // The layer keeps the parts it was given (for the backward too), never a copy of their
  // concatenation. Without a workspace bound, one convolution of the parts concatenated for a
  // moment in each pass: 1.12x the speed of --spatial 2 at 64^3 against a convolution per part
  // (two convolutions of 8 input channels each, bench/RESULTS.md). Under a bound, each part
  // convolved with its channels of the weight and the results added, holding no concatenation even
  // for a moment. (A recomputed forward must take the same way as the first: the bound, not whether
  // autograd records, decides.)
  const spatial::Group* g = graph::current_call().group;
  if (graph::current_call().workspace_bound == 0) {
    return g ? slab_conv(*g, parts, weight, bias, padding, {})
             : SplitConv3d::apply(at::TensorList(parts), weight, optional(bias), padding,
                                  spatial::WeightSlice{});
  }
  torch::Tensor y;
  int64_t first = 0;
  for (const torch::Tensor& part : parts) {
    const torch::Tensor w = weight.narrow(1, first, part.size(1));
    const torch::Tensor b = first == 0 ? bias : torch::Tensor();
    const spatial::WeightSlice slice{weight, first};
    const torch::Tensor yi = g ? slab_conv(*g, part, w, b, padding, slice)
                               : SplitConv3d::apply(part, w, optional(b), padding, slice);
    y = y.defined() ? y.add_(yi) : yi;
    first += part.size(1);
  }
  return y;
}

torch::Tensor split_conv3d(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, int64_t padding) {
  if (chunked(x, weight, padding)) return in_chunks({x}, weight, bias, padding);
  if (slab_forward(x, weight, padding))
    return spatial::halo_conv_forward({x}, weight, bias, padding, FoldedKernels(padding));
  if (const spatial::Group* g = graph::current_call().group)
    return slab_conv(*g, x, weight, bias, padding, {});
  return SplitConv3d::apply(x, weight, optional(bias), padding, spatial::WeightSlice{});
}

}  // namespace tandem::models
