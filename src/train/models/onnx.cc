// --model PATH.onnx: a model from an ONNX file (onnx/load.h), with --loss and --output.
#include <algorithm>

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

#if TANDEM_WITH_ONNX
// Refuses samples of `sample` ([C,D,H,W] or any) that the graph cannot take, before anything
// runs, with the nearest cube sizes that it takes where the samples are cubes.
void refuse_sizes_it_cannot_take(const Config& c, const onnx::LoadOptions& o,
                                 const std::vector<int64_t>& sample) {
  const onnx::SampleSizes sizes(c.model, o);
  const std::string why = sizes.refusal(sample);
  if (why.empty()) return;
  std::string hint;
  const bool cube = sample.size() >= 3 && std::all_of(sample.begin() + 1, sample.end(),
                                                      [&](int64_t n) { return n == sample[1]; });
  if (cube) {
    const auto fits = [&](int64_t side) {
      std::vector<int64_t> s(sample.size(), side);
      s[0] = sample[0];
      return sizes.refusal(s).empty();
    };
    const int64_t side = sample[1];
    int64_t below = 0, above = 0;
    for (int64_t k = 1; k <= 64 && (!below || !above); ++k) {
      if (!below && side - k >= 1 && fits(side - k)) below = side - k;
      if (!above && fits(side + k)) above = side + k;
    }
    const std::string sides = below && above ? fmt::format("{} or {}", below, above)
                              : above        ? fmt::format("{}", above)
                                             : fmt::format("{}", below);
    if (below || above)
      hint = c.volume == side ? fmt::format("; use Config::volume = {}", sides)
                              : fmt::format("; it takes cubes of side {}", sides);
  }
  TANDEM_CHECK(false,
               "model {} cannot take samples of shape [{}]: ONNX's shape inference at that size "
               "stops at {}{}",
               c.model, fmt::join(sample, ","), why, hint);
}
#endif

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
#if TANDEM_WITH_ONNX
  k.check_sample = [](const Config& c, const std::vector<int64_t>& sample) {
    onnx::LoadOptions o;
    if (!c.loss.empty()) o.loss = c.loss;
    o.output = c.output;
    refuse_sizes_it_cannot_take(c, o, sample);
  };
#endif
  return k;
}

}  // namespace tandem::train
