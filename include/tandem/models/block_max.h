// Max pooling whose windows tile the volume (each kernel extent equal to its stride, no padding
// or dilation): the maximum of each block, in the input's own type. For a reduced --precision
// on CPU devices: LibTorch's (1.13) CPU max_pool3d has no bf16 kernel, so autocast runs it on an
// fp32 copy of its input, kept for the backward beside int64 indices, and its fp32 output makes
// the next layer's input fp32 again. This pooling keeps nothing of its own: its backward finds
// each block's maximum again in the input that the layers around it keep anyway.
#pragma once

#include <torch/types.h>

namespace tandem::models {

// Whether block_max_pool computes max pooling of `x` with this kernel (strides equal to it,
// no padding, no dilation, floor rounding: checked by the caller): x is bf16 or fp16 with 3
// spatial axes, on a CPU device (LibTorch's CPU max_pool1d and max_pool2d have bf16 kernels).
bool block_max_pool_here(const torch::Tensor& x, at::IntArrayRef kernel);

// Max pooling of x [B, C, S...] by non-overlapping blocks of `kernel` [k...]: [B, C, S / k...]
// (the rest of a side that is not a whole block is left out, as max_pool's floor rounding
// does). Its gradient goes to the first maximum of each block in (depth, height, width) order,
// where max_pool's goes: where values tie, to one of them.
torch::Tensor block_max_pool(const torch::Tensor& x, at::IntArrayRef kernel);

}  // namespace tandem::models
