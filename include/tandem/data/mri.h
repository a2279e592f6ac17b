// Brain segmentation crops from one real T1 MRI volume and its brain mask.
//
// Source: the ch2 template (ch2.nii.gz, 181x217x181, 1 mm) and its skull-stripped copy
// ch2bet.nii.gz from Debian's mricron-data; the target is ch2bet > 0. Volumes are held as
// [Z,Y,X] (see nifti.h); S is the crop side.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tandem/data/volume_batch.h"

namespace tandem::data {

struct MriOptions {
  // The last held_out_fraction of the X axis (data dim 2; left-right in ch2) is a slab that
  // training crops never touch; held-out crops lie inside it. In 0 (no held-out set) .. 0.9.
  // 0.4 leaves 72 of ch2's 181 columns for held-out crops, so crops up to 72 fit both parts.
  double held_out_fraction = 0.4;
  bool flips = true;        // random flips of training crops along each axis (never held-out ones)
  bool standardize = true;  // head_standardized (below); false: the scan's values as stored
};

// Random S^3 crops of the normalized image with their mask crops. Crop i of a subset is a
// pure function of (seed, subset, i); sample() is const and thread-safe.
//
// Normalization: z-score over the head, i.e. (x - mean) / std with mean and std taken over
// the voxels of the image that are > 0 (the template's background is exactly 0), so the
// scale does not depend on how much empty space surrounds the head.
//
// Placement: the crop origin is drawn uniformly from the origins whose center lies in the
// bounding box of the brain mask (clamped so the crop stays in its slab), redrawn up to 32
// times until the center voxel itself is brain. So a crop holds brain whenever its slab
// does, and still background around it, which keeps the segmentation task informative.
class MriDataset {
 public:
  // Throws tandem::Error naming the files for unreadable volumes, differing shapes, an
  // empty mask or a constant image, and, with the sizes, for a crop larger than the volume
  // or than the training or held-out slab.
  MriDataset(const std::string& image_path, const std::string& mask_path, int crop, uint64_t seed,
             MriOptions options = {});

  // Throws like the constructor when `crop` does not fit a volume of `shape` [Z,Y,X] or its
  // training or held-out slab; returns the first held-out column x.
  static int64_t check_fits(const std::array<int64_t, 3>& shape, int crop,
                            const MriOptions& options, const std::string& image_path);

  // Crops first_index .. first_index + batch - 1 of `subset`: input [B,1,S,S,S] float32,
  // target [B,1,S,S,S] float32 0/1. Held-out crops are not flipped.
  VolumeBatch sample(int64_t first_index, int batch, Subset subset = Subset::kTrain) const;

  // Where a crop lands: origin (z, y, x) of the crop in the volume and its flips per axis.
  struct Placement {
    std::array<int64_t, 3> origin;
    std::array<bool, 3> flipped;
  };
  Placement placement(int64_t index, Subset subset) const;

  const torch::Tensor& image() const { return image_; }  // [Z,Y,X] float32, normalized
  const torch::Tensor& mask() const { return mask_; }    // [Z,Y,X] float32 0/1
  int crop() const { return crop_; }
  // Training crops use columns x < held_out_begin(); held-out crops use x >= it.
  int64_t held_out_begin() const { return held_out_begin_; }

 private:
  torch::Tensor image_;
  torch::Tensor mask_;
  int crop_;
  uint64_t seed_;
  MriOptions options_;
  int64_t held_out_begin_;
  // Inclusive origin ranges per axis (z, y, x) for each subset.
  std::array<std::array<int64_t, 2>, 3> train_range_{};
  std::array<std::array<int64_t, 2>, 3> held_out_range_{};
};

// How MriDataset standardizes, for any scan: per channel, (x - mean) / deviation with both taken
// over the channel's voxels > 0 (the head), in double. image [C,Z,Y,X] -> float32. Throws
// tandem::Error naming `path` for a channel with fewer than 2 voxels > 0 or constant over them.
torch::Tensor head_standardized(const torch::Tensor& image, const std::string& path);

}  // namespace tandem::data
