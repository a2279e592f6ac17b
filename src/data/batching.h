// Epoch shuffling and batch gathering for in-memory image data sets.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "tandem/data/mnist.h"

namespace tandem::data {

// One batch of a labelled image data set.
struct ImageBatch {
  torch::Tensor images;  // [B,1,H,W] float32
  torch::Tensor labels;  // [B] int64
};

// A permutation of 0..n-1 that depends only on (seed, epoch): a Fisher-Yates shuffle driven
// by SampleRng, so it is the same on every platform and standard library. n >= 0, epoch >= 0.
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, int64_t epoch);

// The examples idx[begin..end) of `dataset`, in that order. Requires
// 0 <= begin <= end <= idx.size() and every index in [0, dataset.size()).
ImageBatch gather(const ImageDataset& dataset, const std::vector<int64_t>& idx, int64_t begin,
                  int64_t end);

}  // namespace tandem::data
