// The trainer's one hook for models from ONNX files (tandem/onnx/load.h).
#pragma once

#include "tandem/graph/model.h"
#include "tandem/train/config.h"

namespace tandem::train {

// Whether --model names an ONNX file.
bool onnx_file(const Config& c);

// The model of the ONNX file --model, with --loss and --output. Throws tandem::Error when
// this build has no ONNX part (the library was missing when it was configured).
graph::Model onnx_model(const Config& c);

}  // namespace tandem::train
