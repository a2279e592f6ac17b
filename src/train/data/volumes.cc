// --data spheres, mri and regression: volumes of --volume^3 (train/volume_source.h).
#include "tandem/train/catalog.h"
#include "tandem/train/volume_source.h"

namespace tandem::train {

std::vector<DataKind> data_kinds_volumes() {
  auto kind = [](const std::string& name, const std::string& summary, ModelNeeds::Target target) {
    DataKind k;
    k.name = name;
    k.summary = summary;
    k.volumes = true;
    k.target = target;
    k.make = [name](const Config& c, const std::string& dir, const ModelNeeds&) {
      return make_volume_source(name, c.volume, 1, c.seed, c.train_samples, c.test_samples, dir,
                                c.normalize);
    };
    return k;
  };
  return {kind("spheres", "generated volumes of spheres and their 0/1 masks",
               ModelNeeds::Target::kMask),
          kind("mri", "crops of a T1 MRI (Debian's mricron-data) and 0/1 brain masks",
               ModelNeeds::Target::kMask),
          kind("regression", "generated volumes and their local means (real-valued targets)",
               ModelNeeds::Target::kReal)};
}

}  // namespace tandem::train
