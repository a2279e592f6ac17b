// A 3D convolution (stride 1, `padding` on every side) whose backward can split like
// split_linear: the input gradient goes back to autograd at once, the weight and bias
// gradients are deferred to the W action when the micro-batch's queue is deferring.
// A single sample on the CPU runs as a batch of two slabs when LibTorch would take its slow
// path for it (DepthFold).
// Forward only (no autograd: evaluation, tandem predict) on whole samples of at least
// spatial::kForwardChunkBytes of output, it runs in chunks of planes (spatial/forward_chunks.h).
// Shapes: x [B,Cin,D,H,W], weight [Cout,Cin,k,k,k], bias [Cout] (may be undefined).
#pragma once

#include <torch/types.h>

#include <vector>

namespace tandem::models {

torch::Tensor split_conv3d(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, int64_t padding);

// The same convolution of `parts` concatenated along the channels, without a copy of the
// concatenation to keep: each pass concatenates the parts for its moment where the call has no
// workspace bound (graph::CallContext::workspace_bound), and under one the result is the sum of
// each part's convolution with its channels of the weight; either way the parts alone are kept
// for the backward. Forward only on whole samples of spatial::kForwardChunkBytes or more, each
// chunk concatenates its own planes.
torch::Tensor split_conv3d_concat(const std::vector<torch::Tensor>& parts,
                                  const torch::Tensor& weight, const torch::Tensor& bias,
                                  int64_t padding);

}  // namespace tandem::models
