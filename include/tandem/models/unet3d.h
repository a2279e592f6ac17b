// The 3D U-Net for volumetric segmentation, as a flat list of layers over named tensors.
//
// Shapes: B batch, C channels, D,H,W volume, F = filters, L = levels, F_l = F * 2^l.
//   input [B,in_channels,D,H,W] -> output [B,1,D,H,W] (probabilities); target [B,1,D,H,W] 0/1.
//   D, H and W must be divisible by 2^(L-1).
//
// Layers, in order (each Conv3D is 3x3x3, "same" padding, relu):
//   encoder, l = 0 .. L-2:  enc{l}.conv0 -> enc{l}.conv1 (its output is the skip tensor
//                           `skip{l}`, [B,F_l,D/2^l,..]) -> pool{l} (MaxPool3D 2)
//   bottom, level L-1:      bottom.conv0 -> bottom.conv1 [-> bottom.dropout when dropout > 0]
//   decoder, l = L-2 .. 0:  up{l} (Conv3DTranspose 2x2x2, stride 2, F_{l+1} -> F_l)
//                           -> dec{l}.conv0 (reads {"up{l}", "skip{l}"}, concatenated along C)
//                           -> dec{l}.conv1
//   final:                  Conv3D 1x1x1 (F -> 1) + sigmoid, producing "output".
// The skips are plain graph tensors, so any partition works: with the encoder on one stage
// and the decoder on another the skips cross stages, directly to the stage that reads them.
//
// Loss: soft Dice per sample, averaged over the micro-batch (+ mean BCE when `bce`).
// Metric "dice": hard Dice (threshold 0.5) summed over the samples.
#pragma once

#include <cstdint>

#include "tandem/graph/model.h"
#include "tandem/models/losses.h"  // the model's loss and metric

namespace tandem::models {

struct Unet3dOptions {
  int levels = 4;  // resolution levels, the bottom included (L - 1 poolings)
  int64_t filters = 32;
  int64_t in_channels = 1;
  // Keyed dropout (models::KeyedDropout: each sample's mask keyed by its place in the batch,
  // the same under any split of the batch and on recomputation) on the bottom level's output,
  // the end of the contracting path. 0: no dropout layer.
  double dropout = 0.0;
  bool bce = false;  // add the mean binary cross-entropy to the Dice loss
  // Side S of the S^3 volumes it will see, for the FLOPs in reports and to check
  // divisibility early; 0: unknown. Never affects the computation.
  int64_t volume = 0;
};

// Throws tandem::Error for levels < 1, filters < 1, in_channels < 1, dropout outside [0, 1),
// or a volume not divisible by 2^(levels-1). An input whose side is not divisible is reported
// by the pool layer at run time, with the side to use.
graph::Model unet3d(const Unet3dOptions& options);

}  // namespace tandem::models
