// A 3D convolution (stride 1, `padding` on every side) whose backward can split like
// split_linear: the input gradient goes back to autograd at once, the weight and bias
// gradients are deferred to the W action when the micro-batch's queue is deferring.
// A single sample on the CPU runs as a batch of two slabs when LibTorch would take its slow
// path for it (DepthFold).
// Forward only (no autograd: evaluation, tandem predict) on whole samples of at least
// kForwardChunkBytes of output, the output is computed in chunks of about an eighth of its
// planes along depth, each from the input planes it reads, into the one output tensor: what
// the convolution holds besides its input and output (LibTorch's reordered copies) is a chunk's,
// not the volume's.
// Shapes: x [B,Cin,D,H,W], weight [Cout,Cin,k,k,k], bias [Cout] (may be undefined).
#pragma once

#include <torch/types.h>

#include <utility>
#include <vector>

namespace tandem::models {

torch::Tensor split_conv3d(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, int64_t padding);

// The same convolution of `parts` concatenated along the channels. Forward only, the
// concatenation of the whole volume is never made: on whole samples each chunk concatenates its
// own planes; on a slab the result is the sum of each part's convolution with its channels of
// the weight.
torch::Tensor split_conv3d_concat(const std::vector<torch::Tensor>& parts,
                                  const torch::Tensor& weight, const torch::Tensor& bias,
                                  int64_t padding);

// The smallest output, in bytes, whose forward-only convolution runs in chunks.
constexpr int64_t kForwardChunkBytes = int64_t{4} << 20;

// The planes [first, first + count) along depth of chunks of about an eighth of `depth`.
std::vector<std::pair<int64_t, int64_t>> forward_chunks(int64_t depth);

// Whether a forward-only layer with an output of `bytes` runs in chunks: on whole samples, or
// also on a slab of a spatial split when each output plane reads only its own input planes
// (`local`: a transposed convolution whose kernel equals its stride).
bool chunks_forward(int64_t bytes, bool local = false);

}  // namespace tandem::models
