// Trained weights back into the ONNX graph they came from.
#pragma once

#include <cstdint>
#include <string>

namespace tandem::onnx {

// Writes the ONNX model `onnx_in` to `onnx_out` (atomically) with every initializer that
// `checkpoint` holds (a save folder, a step-N checkpoint or a state dict file, under the
// initializers' names: trained parameters and running statistics) replaced by its trained
// value, in the initializer's own element type; everything else in the file is kept as it
// is. PyTorch's num_batches_tracked counters, which have no initializer, are left out.
// Returns the number of initializers replaced. Throws tandem::Error when the checkpoint holds
// a tensor the model has no initializer for, or one of another shape (a checkpoint of another
// model), or when no initializer was replaced.
int64_t export_trained(const std::string& onnx_in, const std::string& checkpoint,
                       const std::string& onnx_out);

}  // namespace tandem::onnx
