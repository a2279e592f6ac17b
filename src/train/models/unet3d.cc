// --model unet3d: a 3D U-Net segmenting volumes with Dice (and --bce) loss (models/unet3d.h).
#include "tandem/models/unet3d.h"

#include "tandem/train/catalog.h"
#include "volume_sides.h"

namespace tandem::train {

ModelKind model_kind_unet3d() {
  ModelKind k;
  k.name = "unet3d";
  k.summary =
      "a 3D U-Net segmenting 0/1 masks (Dice, Config::bce): Config::levels, Config::filters, "
      "Config::dropout";
  k.needs = [](const Config& c) {
    ModelNeeds n;
    n.volumes = true;
    n.target = ModelNeeds::Target::kMask;
    // Every level but the last pools by 2.
    if (c.levels >= 1 && c.levels < 32) n.divisor = int64_t{1} << (c.levels - 1);
    return n;
  };
  k.make = [](const Config& c, const std::vector<int64_t>& input_shape) {
    const VolumeSides v = volume_sides(input_shape);
    models::Unet3dOptions o;
    o.levels = c.levels;
    if (c.filters > 0) o.filters = c.filters;
    o.in_channels = v.channels;
    o.dropout = c.dropout;
    o.bce = c.bce;
    o.volume = v.side;
    return models::unet3d(o);
  };
  return k;
}

}  // namespace tandem::train
