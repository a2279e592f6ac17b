// Forward only (no autograd: evaluation, tandem predict), a layer of whole samples computes its
// output in chunks of planes along depth (dimension 2), each from the input planes it reads,
// into the one output tensor: what the layer holds besides its input and output (LibTorch's
// reordered copies of the input, a concatenation) is a chunk's, not the volume's. The results
// equal the whole layer's within float rounding.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace tandem::spatial {

// Depth is dimension 2 of [B,C,D,...]: where a spatial split cuts the volume, and where forward
// chunks cut a layer's output.
constexpr int64_t kDepthDim = 2;

// The smallest output, in bytes, whose forward-only layer runs in chunks.
constexpr int64_t kForwardChunkBytes = int64_t{4} << 20;

// The planes [first, first + count) along depth of chunks of about an eighth of `depth`.
std::vector<std::pair<int64_t, int64_t>> forward_chunks(int64_t depth);

// Whether a forward-only layer with an output of `bytes` runs in chunks: on whole samples, or
// also on a slab of a spatial split when each output plane reads only its own input planes
// (`local`: a transposed convolution whose kernel equals its stride).
bool chunks_forward(int64_t bytes, bool local = false);

// A convolution of stride 1 along depth with `padding` zero planes before and after it (a
// kernel of 2 x padding + 1 planes) of `parts` concatenated along the channels (dimension 1),
// chunk by chunk: `conv` computes the convolution of its input without padding along depth. The
// chunk's piece is moved into `conv`, which may drop it early (spatial::ConvKernels::forward).
torch::Tensor conv_in_chunks(const std::vector<torch::Tensor>& parts, int64_t padding,
                             const std::function<torch::Tensor(torch::Tensor)>& conv);

// A layer whose output planes [f x first, f x (first + count)) come from its input planes
// [first, first + count) alone (a transposed convolution whose kernel equals its stride f along
// depth), chunk by chunk: `layer` computes the output of a piece of the input.
torch::Tensor local_in_chunks(const torch::Tensor& x, int64_t factor,
                              const std::function<torch::Tensor(const torch::Tensor&)>& layer);

}  // namespace tandem::spatial
