// A transposed convolution whose kernel is as large as its stride on every axis (2x2x2 stride
// 2, the U-Net's up-sampling), as one matrix product: each input voxel's channels times the
// weight [in, out x kernel volume] give the out x kernel block it becomes, blocks that do not
// overlap. For a reduced --precision on CPU devices: LibTorch (1.13) has no bf16 transposed
// convolution there, so autocast runs it in fp32, on an fp32 copy of its input kept for the
// backward, and its fp32 output makes every halo and message after it fp32 too; autocast
// computes this product (addmm) in bf16.
#pragma once

#include <torch/types.h>

namespace tandem::models {

// Whether the product computes the transposed convolution of `x` (CPU, under autocast to a
// reduced type) by `weight` [in, out, k...] with these strides (ungrouped, no padding, no
// dilation, no output padding checked by the caller): each kernel extent equals its stride.
bool transposed_conv_as_product_here(const torch::Tensor& x, const torch::Tensor& weight,
                                     at::IntArrayRef strides);

// The transposed convolution of x [B, in, S...] (1 to 3 spatial axes) by weight [in, out, k...]
// with stride k, plus `bias` [out] (undefined: none): [B, out, S x k...].
torch::Tensor transposed_conv_as_product(const torch::Tensor& x, const torch::Tensor& weight,
                                         const torch::Tensor& bias);

// A convolution whose kernel is one voxel (the U-Net's last layer, F -> 1), as one matrix
// product per sample: the weight [out, in] times the sample's [in, voxels], views of both (no
// copy kept for the backward). For a reduced --precision on CPU devices: LibTorch's (1.13) bf16
// convolution of one output channel held 47 MiB for a moment at 64^3 where fp32 holds 2, the
// most of any layer there.
bool pointwise_conv_as_product_here(const torch::Tensor& x, const torch::Tensor& weight);

// The convolution of x [B, in, S...] by weight [out, in, 1...] plus `bias` [out] (undefined:
// none): [B, out, S...].
torch::Tensor pointwise_conv_as_product(const torch::Tensor& x, const torch::Tensor& weight,
                                        const torch::Tensor& bias);

}  // namespace tandem::models
