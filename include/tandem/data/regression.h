// A synthetic voxel-wise regression task for Conv3D stacks: noise in, smooth field out.
#pragma once

#include <cstdint>

#include "tandem/data/volume_batch.h"

namespace tandem::data {

// Samples first_index .. first_index + batch - 1 of a regression task, each a pure function
// of (seed, index) (no global torch RNG).
//   input  [B,C,S,S,S]: i.i.d. standard normal noise.
//   target [B,1,S,S,S]: tanh(g * smooth(sum_c w_c * input_c)), with w_c = +-1/sqrt(C)
//     (alternating signs, c = 0 positive), smooth = a 3x3x3 box mean applied twice (zero
//     padding counted out at the borders), and g = 81^1.5 / 19^1.5 ~ 8.8, the inverse of the
//     smoothed field's standard deviation in the interior, so tanh works in its curved range.
// A target voxel depends only on the 5x5x5 input neighbourhood around it, so a stack of 3D
// convolutions with a nonlinearity can fit it; the task has no noise, so the loss can go to
// near zero. Throws tandem::Error for batch < 1, channels < 1 or size < kMinRegressionSize.
inline constexpr int kMinRegressionSize = 3;  // the side of the box mean
VolumeBatch synthetic_regression(int64_t first_index, int batch, int channels, int size,
                                 uint64_t seed);

}  // namespace tandem::data
