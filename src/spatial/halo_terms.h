// The terms a slab's halo planes add to a halo convolution's edge output planes, and their
// gradients (spatial/halo_conv.cc): for a kernel of three planes along depth, one grouped call on
// the two halos alone; for wider kernels, one call on the two edge pieces, with zeros for x's
// planes.
#pragma once

#include <torch/types.h>

#include <utility>

#include "tandem/spatial/halo.h"
#include "tandem/spatial/halo_conv.h"

namespace tandem::spatial {

// The halos' terms of the edge output planes [B,C',w,...] of x [B,C,d,...] convolved with
// `weight`: the low edge's and the high one's.
std::pair<torch::Tensor, torch::Tensor> halo_terms(const ConvKernels& kernels, const Halo& h,
                                                   const torch::Tensor& x,
                                                   const torch::Tensor& weight);

// From d(loss)/dy: the halos' gradients (`inputs`; else undefined), and their terms of the weight
// gradient added to `*gw` (when not null; then the halos' values are read).
std::pair<torch::Tensor, torch::Tensor> halo_grads(const ConvKernels& kernels, const Halo& h,
                                                   const torch::Tensor& grad,
                                                   const torch::Tensor& x,
                                                   const torch::Tensor& weight, bool inputs,
                                                   torch::Tensor* gw);

}  // namespace tandem::spatial
