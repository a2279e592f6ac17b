// A batch of 3D volumes with voxel-wise targets, as the volume data sets return it.
//
// Shapes: B batch, C channels, S crop/volume side (D = H = W = S).
#pragma once

#include <torch/types.h>

namespace tandem::data {

// Which part of a volume data set: the training samples or the held-out ones.
enum class Subset { kTrain, kHeldOut };

struct VolumeBatch {
  torch::Tensor input;   // [B,C,S,S,S] float32
  torch::Tensor target;  // [B,1,S,S,S] float32: 0/1 masks for segmentation, reals for regression
};

}  // namespace tandem::data
