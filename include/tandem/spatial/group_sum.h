// Sums over the whole sample when every device holds a slab of it: what a loss or a metric
// over a sample (Dice: intersection, prediction and target sums; a mean over all voxels) needs.
#pragma once

#include <torch/types.h>

#include "tandem/graph/call_context.h"

namespace tandem::spatial {

// True while the current call (graph::current_call) runs on a slab of a spatial split.
bool split();

// The sum of `partial` over the slabs of the current call's group: every slab sends its
// partial to the others and adds all of them in slab order, so every slab gets the same bits.
// Without a group (whole samples): `partial`.
//
// Differentiable, with the sum's gradient passed to `partial` unchanged. That is the exact
// gradient of the whole sample's loss when every slab computes the same loss from the sum and
// back-propagates it, and weight gradients are summed over the group (as the runtime does):
// the sum over slabs of d(loss)/d(sum) * d(partial_j)/d(weights) is d(loss)/d(weights).
torch::Tensor group_sum(const torch::Tensor& partial);

// The sum of `partial` over the slabs, like group_sum, for a sum that every slab then uses on
// its own slab only (instance normalization's mean and variance, applied to the slab's
// voxels). Each slab's gradient of such a sum covers its own uses; the whole sample's gradient
// is theirs added up, so the backward sums the gradients over the group too (in slab order:
// every slab gets the same bits). Without a group (whole samples): `partial`.
torch::Tensor group_sum_shared(const torch::Tensor& partial);

// The whole sample's extent along the split dimension at the resolution of `t`, a slab of
// the current call's group (the volume's planes, scaled like the slab: a slab pooled twice
// spans a quarter of the planes). Only within a split (split()). Throws tandem::Error when t's
// planes are not the slab's scaled by a whole factor.
int64_t whole_extent(const torch::Tensor& t);

// The number of elements per sample of the whole-sample tensor that `t` [B,...] is a slab of.
int64_t whole_elements_per_sample(const torch::Tensor& t);

// Where `t` [B,...] sits in its whole samples (graph::SampleWindow): within a split, the slab's
// first plane at t's resolution along the split dimension and the whole sample's sizes;
// otherwise the current call's window (whole samples unless a runtime set one). What per-element
// random numbers (dropout masks) are drawn in, so a slab's mask is its slice of the whole
// sample's mask.
graph::SampleWindow sample_window(const torch::Tensor& t);

}  // namespace tandem::spatial
