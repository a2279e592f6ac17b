// Dropout masks keyed by sample. Element e of sample i (its global index in the step's batch
// over all replicas) draws the 32-bit number
//
//   philox4x32_10(key, counter = {e / 4 (64 bits), i (64 bits)}) lane e % 4
//
// (ATen's at::philox_engine with seed = key, subsequence = i, offset = e / 4) and is kept when
// that number is below keep_probability * 2^32. A micro-batch therefore draws exactly its own
// samples' masks: any split of the batch (micro-batches, replicas, ranks), a recomputed
// forward and one device on the whole batch all see the same mask of every sample.
// Shapes: B samples, then the per-sample dimensions.
#pragma once

#include <c10/util/ArrayRef.h>
#include <torch/types.h>

#include <cstdint>

#include "tandem/graph/call_context.h"

namespace tandem::models {

// The scaled keep mask (0 or 1 / keep_probability, float) for a tensor of `sizes` = [B, ...]
// whose first sample is sample `first_sample` of the step's batch. With a `window`, the tensor
// holds a part of each sample (graph::SampleWindow) and element indices are those of the whole
// sample, so the mask of a window equals the same window cut from the whole sample's mask.
// Throws tandem::Error for keep_probability outside (0, 1], a negative first sample, or a
// window that does not fit `sizes`.
torch::Tensor keyed_dropout_mask(uint64_t key, int64_t first_sample, c10::IntArrayRef sizes,
                                 double keep_probability, const graph::SampleWindow& window = {});

}  // namespace tandem::models
