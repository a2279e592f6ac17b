// The multi-layer perceptron users pipeline today:
//   Flatten -> Dense(W, relu) -> `blocks` x [Dense(W, relu), Dense(W, relu)] -> Dropout(p)
//   -> Dense(classes); softmax cross-entropy; accuracy as the metric.
// Shapes: input [B,1,28,28] (any [B,...] with `inputs` features), target [B] int64.
#pragma once

#include "tandem/graph/model.h"
#include "tandem/models/losses.h"  // the model's loss and metric

namespace tandem::models {

struct MlpOptions {
  int64_t inputs = 28 * 28;
  int64_t width = 128;
  int blocks = 2;
  double dropout = 0.2;
  int64_t classes = 10;
};

graph::Model mlp(const MlpOptions& options);

}  // namespace tandem::models
