// The losses and metrics of tandem's models, for models of one's own too: cross-entropy and
// accuracy for classification (mlp), mean squared error (conv3d-stack), soft Dice, binary
// cross-entropy and the hard Dice score for 0/1 masks (unet3d). Each decomposes over the
// micro-batches of a batch (the runtime weights a micro-batch's loss by its share of the batch)
// and, on the slabs of a spatial split, sums over the whole sample (spatial/group_sum.h).
#pragma once

#include <torch/types.h>

namespace tandem::models {

// Loss and metric for classification: mean cross-entropy of logits [B,C] against labels [B];
// number of correct argmax predictions.
torch::Tensor cross_entropy_loss(const torch::Tensor& logits, const torch::Tensor& labels);
double correct_predictions(const torch::Tensor& logits, const torch::Tensor& labels);

// Mean squared error over all elements of output and target [B,...] (same shapes). Every
// sample has the same number of elements, so a micro-batch's mean weighted by its share of
// the batch sums to the full batch's mean.
torch::Tensor mse_loss(const torch::Tensor& output, const torch::Tensor& target);
// Sum over the samples of each sample's mean squared error (the "mse" metric: the runtime
// divides by the sample count, giving the mean per-sample MSE; lower is better).
double mse_per_sample_sum(const torch::Tensor& output, const torch::Tensor& target);

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
