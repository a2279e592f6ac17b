#include "onnx_model.h"

#include "tandem/common/check.h"
#if TANDEM_WITH_ONNX
#include "tandem/onnx/load.h"
#endif

namespace tandem::train {

bool onnx_file(const Config& c) {
  const std::string suffix = ".onnx";
  return c.model.size() > suffix.size() &&
         c.model.compare(c.model.size() - suffix.size(), suffix.size(), suffix) == 0;
}

graph::Model onnx_model(const Config& c) {
#if TANDEM_WITH_ONNX
  onnx::LoadOptions o;
  if (!c.loss.empty()) o.loss = c.loss;
  o.output = c.output;
  return onnx::load(c.model, o);
#else
  TANDEM_CHECK(false,
               "--model {}: this tandem was built without its ONNX part (the ONNX library was "
               "missing when it was configured): install libonnx-dev (or run scripts/setup) "
               "and configure and build again",
               c.model);
#endif
}

}  // namespace tandem::train
