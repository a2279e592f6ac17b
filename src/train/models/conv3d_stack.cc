// --model conv3d-stack: same-padded 3D convolutions regressing a volume (models/conv3d_stack.h).
#include "tandem/models/conv3d_stack.h"

#include "tandem/train/catalog.h"
#include "volume_sides.h"

namespace tandem::train {

ModelKind model_kind_conv3d_stack() {
  ModelKind k;
  k.name = "conv3d-stack";
  k.summary =
      "3D convolutions regressing a volume (mean squared error): Config::convs, Config::filters";
  k.needs = [](const Config&) {
    ModelNeeds n;
    n.volumes = true;
    n.target = ModelNeeds::Target::kReal;
    return n;
  };
  k.make = [](const Config& c, const std::vector<int64_t>& input_shape) {
    const VolumeSides v = volume_sides(input_shape);
    models::Conv3dStackOptions o;
    o.convs = c.convs;
    if (c.filters > 0) o.filters = c.filters;
    o.in_channels = v.channels;
    o.volume = v.side;
    return models::conv3d_stack(o);
  };
  return k;
}

}  // namespace tandem::train
