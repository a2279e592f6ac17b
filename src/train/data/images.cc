// --data mnist and fashion-mnist: 28x28 grey images of 10 classes (data/mnist.h).
#include "tandem/train/catalog.h"

namespace tandem::train {

std::vector<DataKind> data_kinds_images() {
  auto kind = [](const std::string& name, const std::string& summary) {
    DataKind k;
    k.name = name;
    k.summary = summary;
    k.make = [name](const Config& c, const std::string& dir, const ModelNeeds&) {
      return make_image_source(name, dir, c.seed, c.normalize);
    };
    return k;
  };
  return {
      kind("mnist", "handwritten digits, 60000 training and 10000 test images (Config::data_dir)"),
      kind("fashion-mnist", "Zalando's clothing images, MNIST's sizes (Config::data_dir)")};
}

}  // namespace tandem::train
