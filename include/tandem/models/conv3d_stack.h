// A stack of 3D convolutions for voxel-wise regression, the model that outgrows one GPU first:
//   `convs` - 1 x Conv3D(filters, 3x3x3, same, relu) -> Conv3D(1, 3x3x3, same)
// one layer per convolution, named conv0 .. conv{convs-1}; MSE loss; "mse" as the metric.
//
// Shapes: B batch, C channels, D,H,W volume (any size; "same" padding keeps it).
//   input [B,in_channels,D,H,W] -> output [B,1,D,H,W]; target [B,1,D,H,W] float32.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/graph/model.h"
#include "tandem/models/losses.h"  // the model's loss and metric

namespace tandem::models {

struct Conv3dStackOptions {
  int convs = 10;
  int64_t filters = 256;
  int64_t in_channels = 1;
  // The side S of the S^3 volumes it will see, for the FLOPs in reports; 0: unknown (the
  // layers then report 0 FLOPs). Never affects the computation.
  int64_t volume = 0;
};

// Throws tandem::Error for convs < 1, filters < 1, in_channels < 1 or volume < 0.
graph::Model conv3d_stack(const Conv3dStackOptions& options);

// One Conv3D(in -> out, kernel^3, stride 1, padding kernel/2 ("same" for odd kernels), bias)
// as a layer, optionally followed by relu. `voxels`: output voxels per sample, for
// forward_flops_per_sample = 2 * in * out * kernel^3 * voxels (0 when unknown).
graph::Layer conv3d_layer(std::string name, int64_t in, int64_t out, int64_t kernel, bool relu,
                          std::string input, std::string output, int64_t voxels = 0);

}  // namespace tandem::models
