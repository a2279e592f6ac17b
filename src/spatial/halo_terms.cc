#include "halo_terms.h"

#include <vector>

#include "tandem/spatial/forward_chunks.h"

namespace tandem::spatial {

namespace {

// d(loss)/dy's planes that read the halo below (`low`) or above.
torch::Tensor edge_grad(const Halo& h, const torch::Tensor& grad, bool low) {
  return grad.narrow(kDepthDim, low ? 0 : h.depth - h.width, h.width).contiguous();
}

// Both edge pieces as one batch (low first), [2B,C,3w,...], with only the halo's planes in them
// and x's planes zero (`values` false: any values, for a pass that reads only their shape).
// Both, even at the volume's ends, and as one call: a piece of one output plane per sample would
// take LibTorch's slow single-sample path on the CPU.
torch::Tensor edge_pieces(const Halo& h, const torch::Tensor& x, bool values) {
  const int64_t b = x.size(0), w = h.width;
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[0] = 2 * b;
  sizes[kDepthDim] = 3 * w;
  const auto options = x.options().requires_grad(false);
  if (!values) return torch::empty(sizes, options);
  torch::Tensor pieces = torch::zeros(sizes, options);
  // The low piece [0, 3w) holds `before` in its first w planes; the high one [d - w, d + 2w),
  // `after` in its last w.
  pieces.narrow(0, 0, b).narrow(kDepthDim, 0, w).copy_(h.before);
  pieces.narrow(0, b, b).narrow(kDepthDim, 2 * w, w).copy_(h.after);
  return pieces;
}

// d(loss)/dy's planes that read either halo, as one batch matching edge_pieces.
torch::Tensor edge_grads(const Halo& h, const torch::Tensor& grad) {
  return torch::cat({edge_grad(h, grad, true), edge_grad(h, grad, false)}, 0);
}

// A kernel of three planes along depth (w = 1) reads the halo before through its first plane only
// (into output plane 0) and the halo after through its last (into plane d - 1). The halos' terms
// are then one call of two groups: [before, after] along the channels [B,2C,1,...], convolved
// with [the weight's first plane; its last] along the output channels [2C',C/g,1,...] (g: the
// layer's groups). That is each product the edge planes need once, where the edge pieces'
// kernel also multiplies their zero planes (3x the work); and a call with groups takes oneDNN
// even for one sample (LibTorch's ConvParams::use_mkldnn).
bool by_end_planes(const Halo& h) { return h.width == 1; }

torch::Tensor end_planes(const torch::Tensor& weight) {
  const int64_t k = weight.size(kDepthDim);
  return torch::cat({weight.narrow(kDepthDim, 0, 1), weight.narrow(kDepthDim, k - 1, 1)}, 0);
}

// [before, after] along the channels (`values` false: any values, for a pass that reads only
// their shape).
torch::Tensor both_halos(const Halo& h, const torch::Tensor& x, bool values) {
  if (values) return torch::cat({h.before, h.after}, 1);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[1] *= 2;
  sizes[kDepthDim] = 1;
  return torch::empty(sizes, x.options().requires_grad(false));
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> halo_terms(const ConvKernels& kernels, const Halo& h,
                                                   const torch::Tensor& x,
                                                   const torch::Tensor& weight) {
  const int64_t b = x.size(0), out = weight.size(0);
  if (by_end_planes(h)) {
    const torch::Tensor terms =
        kernels.forward(both_halos(h, x, true), end_planes(weight), torch::Tensor(), 0, 2);
    return {terms.narrow(1, 0, out), terms.narrow(1, out, out)};
  }
  const torch::Tensor terms = kernels.forward(edge_pieces(h, x, true), weight, torch::Tensor(), 0);
  return {terms.narrow(0, 0, b), terms.narrow(0, b, b)};
}

std::pair<torch::Tensor, torch::Tensor> halo_grads(const ConvKernels& kernels, const Halo& h,
                                                   const torch::Tensor& grad,
                                                   const torch::Tensor& x,
                                                   const torch::Tensor& weight, bool inputs,
                                                   torch::Tensor* gw) {
  const int64_t b = x.size(0), c = x.size(1), out = weight.size(0), w = h.width;
  const bool values = gw != nullptr;
  if (by_end_planes(h)) {
    const int64_t d = grad.size(kDepthDim), k = weight.size(kDepthDim);
    const torch::Tensor g =
        torch::cat({grad.narrow(kDepthDim, 0, 1), grad.narrow(kDepthDim, d - 1, 1)}, 1);
    auto [gh, gw_ends, unused] = kernels.backward(g, both_halos(h, x, values), end_planes(weight),
                                                  torch::Tensor(), 0, {inputs, values, false}, 2);
    if (gw) {
      gw->narrow(kDepthDim, 0, 1).add_(gw_ends.narrow(0, 0, out));
      gw->narrow(kDepthDim, k - 1, 1).add_(gw_ends.narrow(0, out, out));
    }
    if (!inputs) return {};
    return {gh.narrow(1, 0, c), gh.narrow(1, c, c)};
  }
  auto [pieces, gw_edge, unused] =
      kernels.backward(edge_grads(h, grad), edge_pieces(h, x, values), weight, torch::Tensor(), 0,
                       {inputs, values, false});
  if (gw) gw->add_(gw_edge);
  if (!inputs) return {};
  return {pieces.narrow(0, 0, b).narrow(kDepthDim, 0, w),
          pieces.narrow(0, b, b).narrow(kDepthDim, 2 * w, w)};
}

}  // namespace tandem::spatial
