// A convolution on the slabs of a spatial split that holds, for the backward and for a moment,
// what one device holds for the same planes: it keeps the slab's input x, never x with its
// halos. Its passes run over the whole slab, as one device's run over the whole sample, unless
// the call bounds their workspace (graph::CallContext::workspace_bound: a 64th of
// --device-memory); then in chunks of planes whose workspace stays within the bound.
//
// Shapes: x [B,C,D,...] is a slab of `d` planes along depth (dimension 2); the convolution has
// stride 1 and reach 2w + 1 along depth ("same" padding w; w = 0 for a kernel of one plane),
// and any stride, dilation, padding and groups on the other dimensions (the kernels' business).
// Output [B,C',d,...]. Planes of "x with halos" [before, x, after] are numbered from 0; output
// plane o reads planes [o, o + 2w]. Each halo's own terms reach the w output planes at its end:
// for w = 1 (a kernel of three planes), one call of two groups convolves [before, after] (along
// the channels) with the kernel's first and last planes; for wider kernels, one call on the edge
// pieces [0, 3w) and [d - w, d + 2w) with only the halo's planes in them (zeros elsewhere).
//
// - forward, whole: x's convolution padded with w zero planes along depth, plus the halos' terms
//   added to the first and last w planes. In chunks: a chunk of outputs [a, b) is the
//   convolution, without padding along depth, of planes [a, b + 2w).
// - backward, whole: one call gives d(loss)/dx from this slab's outputs and the weight gradient
//   of x padded with zero planes; the halos' call backward gives the halos' gradients (sent to
//   their owners, halo.h: return_halo_grads) and the halos' terms of the weight gradient (the
//   neighbours send the halos again for it, halo.h: refetch_halo).
// - backward, in chunks: d(loss)/dx chunk by chunk, the gradient of planes [p, q) being that of
//   their outputs [p - 2w, q) through a convolution that pads 2w along depth (an input gradient
//   depends on the input's shape only), zeros standing for outputs beyond the slab; the weight
//   gradient as in the whole pass (it holds little besides its result).
// - forward only (no autograd: tandem predict, an evaluation): in chunks of at most half the
//   result, as whole samples run forward-only convolutions in chunks (forward_chunks.h).
//
// The halos' terms add a second sum to the edge planes and to the weight gradient where one
// device's convolution adds one: the results differ from one device's in float rounding, as any
// split's sums do.
#pragma once

#include <torch/types.h>

#include <array>
#include <memory>
#include <tuple>
#include <vector>

namespace tandem::spatial {

// The convolution a halo convolution runs: its forward and backward with `depth_padding` zero
// planes before and after along depth (dimension 2) and the layer's own geometry elsewhere.
class ConvKernels {
 public:
  virtual ~ConvKernels() = default;
  // `x` by value: a caller that moves its piece in lets the kernels drop it as soon as they have
  // made what they convolve from it (a copy in another layout), so the two are never held at once.
  // `groups`: times the layer's own groups (the weight then holds that many more output channels
  // and as many fewer input channels per group).
  virtual torch::Tensor forward(torch::Tensor x, const torch::Tensor& weight,
                                const torch::Tensor& bias, int64_t depth_padding,
                                int64_t groups = 1) const = 0;
  // The input, weight and bias gradients selected by `mask` (undefined where not selected);
  // `bias` may be undefined (no bias gradient then).
  virtual std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> backward(
      const torch::Tensor& grad, const torch::Tensor& x, const torch::Tensor& weight,
      const torch::Tensor& bias, int64_t depth_padding, std::array<bool, 3> mask,
      int64_t groups = 1) const = 0;
  // The fewest planes a chunk of a pass should have: more where thinner pieces take a slow path.
  virtual int64_t least_planes() const { return 1; }
};

// Where the weight gradient of a deferred backward goes: into `weight` itself (`whole`
// undefined), or into input channels [first, first + weight.size(1)) of the parameter `whole`
// when `weight` is that slice of it (a convolution of a concatenation taken part by part).
struct WeightSlice {
  torch::Tensor whole;
  int64_t first = 0;
};

// x: the one part, or the concatenation of `parts` along the channels (dimension 1), made for a
// moment where a pass needs it; the parts are kept as they are, never their concatenation.
torch::Tensor concatenated(at::TensorList parts);
// The gradients of the parts: views of `grad`, the gradient of their concatenation.
std::vector<torch::Tensor> part_grads(const torch::Tensor& grad, at::TensorList parts);

// The convolution of x (the concatenation of `parts`, or its one part) with halos of `width`
// planes (0 or more), with the current call's slab group (graph::current_call().group, which
// must be set). `may_defer`: the layer splits its
// backward (graph::Layer::splits_backward): in an I action the weight and bias gradients are
// pushed to the micro-batch's deferred queue (graph/deferred.h), refetching the halos when it
// runs; `slice` says where that weight gradient goes.
torch::Tensor halo_conv(at::TensorList parts, const torch::Tensor& weight,
                        const torch::Tensor& bias, int64_t width,
                        std::shared_ptr<const ConvKernels> kernels, bool may_defer,
                        WeightSlice slice = {});

// Forward only (no autograd: tandem predict): the convolution of `parts` concatenated along
// the channels (dimension 1), each a slab of the same planes, with their halos of `width`
// planes, computed chunk by chunk (of two planes at least) into one output as halo_conv's
// forward does; no part's full output or the concatenation is ever held. Every slab of the
// group calls it at the same point.
torch::Tensor halo_conv_forward(const std::vector<torch::Tensor>& parts,
                                const torch::Tensor& weight, const torch::Tensor& bias,
                                int64_t width, const ConvKernels& kernels);

}  // namespace tandem::spatial
