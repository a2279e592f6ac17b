// --data npy:DIR: arrays of one's own, saved with numpy.save, as a training Source.
//
//   DIR/train_x.npy, DIR/train_y.npy   the training samples and their targets
//   DIR/test_x.npy,  DIR/test_y.npy    the held-out ones (both, or neither: no held-out set)
//
// Each is float32, float64, uint8 or int64, in C order (data/npy.h), with the sample count N
// first. What they must hold depends on the model (ModelNeeds), shapes as numpy prints them:
//   classes (the MLP)     x (N, ...) any features; y (N,) int64 or uint8 labels in
//                         [0, classes)
//   volumes (U-Net,       x (N, C, D, H, W), or (N, D, H, W) for one channel; y (N, D, H, W) or
//   Conv3D stack)         (N, 1, D, H, W): 0/1 masks for the U-Net, reals for the Conv3D stack;
//                         for the U-Net, D, H and W multiples of 2^(levels-1)
// The inputs become float32, standardized as `normalization` says: kDefault and kDataset with
// the mean and deviation of all of train_x (one pair, as MNIST's pixels are), applied to test_x
// too; kPerImage each sample by its own (per channel for volumes, over all its values
// otherwise); kNone as stored. Targets become int64 labels or float32 [N,1,D,H,W]. An epoch visits
// the training samples in the order data::shuffled_indices(N, seed, epoch).
//
// The headers are read and checked against the model when the source is made (a file whose
// shape or dtype does not fit is named, with its shape); the elements are read on load() or
// on the first batch, and the label values (range, 0/1) are checked then.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tandem/train/source.h"

namespace tandem::train {

std::unique_ptr<Source> make_npy_source(const std::string& dir, const ModelNeeds& needs,
                                        uint64_t seed, data::Normalization normalization = {});

}  // namespace tandem::train
