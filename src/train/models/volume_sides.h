// What the volumetric models take from a source's sample shape [C,D,H,W].
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/common/check.h"

namespace tandem::train {

struct VolumeSides {
  int64_t channels = 0;
  int64_t side = 0;  // the side when the volume is a cube (for FLOPs), else 0 (unknown)
};

inline VolumeSides volume_sides(const std::vector<int64_t>& input_shape) {
  TANDEM_ASSERT(input_shape.size() == 4, "volume sources give [C,D,H,W]");
  const bool cube = input_shape[1] == input_shape[2] && input_shape[2] == input_shape[3];
  return {input_shape[0], cube ? input_shape[1] : 0};
}

}  // namespace tandem::train
