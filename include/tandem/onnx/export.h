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
//
// `inference` (what an ONNX runtime predicts with): every Dropout loses its training_mode input
// (then off, as ONNX defines it) and every BatchNormalization says training_mode 0 and keeps
// only its first output (the running statistics are used, not updated). false: the graph as it
// was trained (PyTorch's TrainingMode.TRAINING export applies dropout in any runtime). tandem
// loads either the same way. Throws tandem::Error when a node reads a BatchNormalization's
// running-statistics outputs (they exist only in training).
int64_t export_trained(const std::string& onnx_in, const std::string& checkpoint,
                       const std::string& onnx_out, bool inference = true);

}  // namespace tandem::onnx
