// The losses an ONNX model trains with, by name, with their metrics and the final operators
// each takes over (see LoadOptions::loss). Shapes: output [B,C,...] class scores with target
// [B,...] class indices (cross-entropy; a target [B,1,...] is read as [B,...]), or output and
// target of one shape [B,...] (mse, dice, dice+bce; dice on probabilities of a 0/1 mask).
#pragma once

#include <string>
#include <vector>

#include "tandem/graph/model.h"

namespace tandem::onnx::detail {

struct LossEntry {
  const char* name;
  // Operators at the end of the graph this loss takes over (it then reads their input).
  std::vector<std::string> takes_over;
  // The loss and metric on the graph's output, or on the input of the operator taken over.
  graph::LossFn (*loss)(bool taken_over);
  graph::MetricFn (*metric)(bool taken_over);
  const char* metric_name;
  // What the model predicts from the output the loss reads (null: the output as it is).
  graph::PredictionFn (*prediction)(bool taken_over);
};

const LossEntry* find_loss(const std::string& name);
std::vector<std::string> loss_names();

}  // namespace tandem::onnx::detail
