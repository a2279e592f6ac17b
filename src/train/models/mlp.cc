// --model mlp: a multilayer perceptron over the flattened samples (models/mlp.h).
#include "tandem/models/mlp.h"

#include "tandem/train/catalog.h"

namespace tandem::train {

ModelKind model_kind_mlp() {
  ModelKind k;
  k.name = "mlp";
  k.summary =
      "a multilayer perceptron: Config::width, Config::blocks, Config::dropout, Config::classes";
  k.needs = [](const Config& c) {
    ModelNeeds n;
    n.classes = c.classes;
    return n;
  };
  k.make = [](const Config& c, const std::vector<int64_t>& input_shape) {
    models::MlpOptions o;
    o.inputs = 1;
    for (int64_t d : input_shape) o.inputs *= d;
    o.width = c.width;
    o.blocks = c.blocks;
    o.dropout = c.dropout;
    o.classes = c.classes;
    return models::mlp(o);
  };
  return k;
}

}  // namespace tandem::train
