// --model PATH.onnx: a model from an ONNX file (onnx/load.h), with --loss and --output.
#include "tandem/common/check.h"
#include "tandem/train/catalog.h"
#if TANDEM_WITH_ONNX
#include "tandem/onnx/load.h"
#endif

namespace tandem::train {

namespace {

// Whether the graph's samples are [C,D,H,W]; false when the file cannot be loaded (the trainer
// says why when it loads the model).
bool takes_volumes(const Config& c) {
#if TANDEM_WITH_ONNX
  try {
    onnx::LoadOptions o;
    if (!c.loss.empty()) o.loss = c.loss;
    o.output = c.output;
    return onnx::load(c.model, o).input_shape.size() == 4;
  } catch (const Error&) {
    return false;
  }
#else
  (void)c;
  return false;
#endif
}

}  // namespace

ModelKind model_kind_onnx() {
  ModelKind k;
  k.name = "onnx";
  k.suffix = ".onnx";
  k.summary = "a model from an ONNX file (PyTorch, Keras): Config::loss, Config::output";
  k.takes_loss = true;
  k.has_weights = true;
  k.needs = [](const Config& c) {
    // The target follows --loss. Volumes: a graph whose samples are [C,D,H,W] (whatever the
    // loss: a Conv3D stack with mean squared error), a mask loss, or a NIfTI folder.
    ModelNeeds n;
    const bool mask = c.loss == "dice" || c.loss == "dice+bce";
    n.volumes = mask || c.data.rfind("nifti:", 0) == 0 || takes_volumes(c);
    n.target = mask              ? ModelNeeds::Target::kMask
               : c.loss == "mse" ? ModelNeeds::Target::kReal
                                 : ModelNeeds::Target::kClasses;
    n.classes = c.classes;
    n.any_data = true;
    return n;
  };
  k.make = [](const Config& c, const std::vector<int64_t>&) -> graph::Model {
#if TANDEM_WITH_ONNX
    onnx::LoadOptions o;
    if (!c.loss.empty()) o.loss = c.loss;
    o.output = c.output;
    return onnx::load(c.model, o);
#else
    TANDEM_CHECK(
        false,
        "Config::model = {}: this tandem was built without its ONNX part (the ONNX library was "
        "missing when it was configured): install libonnx-dev (or run scripts/setup) "
        "and configure and build again",
        c.model);
#endif
  };
  return k;
}

}  // namespace tandem::train
