// Synthetic segmentation volumes: noisy ellipsoids and their masks, any size.
#pragma once

#include <cstdint>

#include "tandem/data/volume_batch.h"

namespace tandem::data {

struct SpheresOptions {
  int min_objects = 1;  // ellipsoids per volume, drawn uniformly in [min, max]
  int max_objects = 3;
  double min_radius = 0.10;  // semi-axes, as fractions of the side S, drawn per axis
  double max_radius = 0.30;
  double min_intensity = 0.6;  // each ellipsoid's intensity over a background of 0
  double max_intensity = 1.0;
  double noise_std = 0.25;  // i.i.d. Gaussian noise added to every voxel of the input
};

// Sample i is a pure function of (seed, i): it can be drawn in any order, on any thread, and
// does not touch the global torch RNG. sample() is const and thread-safe.
//
// Input: overlapping axis-aligned ellipsoids (an overlap takes the larger intensity) plus
// noise. Target: 1 inside any ellipsoid, 0 outside; the noise never changes the target.
class SpheresDataset {
 public:
  // size: the side S of every volume (>= 4). Throws tandem::Error for bad options.
  SpheresDataset(int size, uint64_t seed, SpheresOptions options = {});

  // Samples first_index .. first_index + batch - 1: input [B,1,S,S,S], target [B,1,S,S,S].
  VolumeBatch sample(int64_t first_index, int batch) const;

  int size() const { return size_; }

 private:
  int size_;
  uint64_t seed_;
  SpheresOptions options_;
};

}  // namespace tandem::data
