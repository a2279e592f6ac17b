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

// Soft Dice loss of probabilities `output` and 0/1 `target` (both [B,1,D,H,W] or any [B,...]):
//   mean over b of 1 - (2 sum(p t) + 1) / (sum(p) + sum(t) + 1), sums over sample b's voxels.
// Computed per sample, then averaged: the runtime weights each micro-batch's loss by its share
// of the batch, and sum over micro-batches m of (B_m / B) * mean_{b in m} loss_b is exactly
// (1 / B) sum_b loss_b, the full batch's loss, for any split. A Dice over the whole batch
// (sums over all samples at once) would not decompose that way, and the pipelined gradient
// would differ from the one-device gradient. The +1 keeps empty masks at loss 0.
torch::Tensor soft_dice_loss(const torch::Tensor& output, const torch::Tensor& target);
// Binary cross-entropy of probabilities against 0/1 targets, mean over all elements (equal
// elements per sample, so it decomposes over micro-batches like the Dice loss).
torch::Tensor bce_loss(const torch::Tensor& output, const torch::Tensor& target);
// Sum over the samples of the hard Dice score 2 |P & T| / (|P| + |T|), P = output > 0.5,
// T = target > 0.5; a sample where both are empty scores 1.
double hard_dice_sum(const torch::Tensor& output, const torch::Tensor& target);

}  // namespace tandem::models
