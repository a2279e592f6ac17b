// A 3D convolution (stride 1, `padding` on every side) whose backward can split like
// split_linear: the input gradient goes back to autograd at once, the weight and bias
// gradients are deferred to the W action when the micro-batch's queue is deferring.
// A single sample on the CPU runs as a batch of two slabs when LibTorch would take its slow
// path for it (DepthFold).
// Shapes: x [B,Cin,D,H,W], weight [Cout,Cin,k,k,k], bias [Cout] (may be undefined).
#pragma once

#include <torch/types.h>

namespace tandem::models {

torch::Tensor split_conv3d(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, int64_t padding);

}  // namespace tandem::models
