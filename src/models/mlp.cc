#include "tandem/models/mlp.h"

#include <torch/nn/functional/loss.h>

#include "tandem/common/check.h"
#include "tandem/models/layers.h"

namespace tandem::models {

graph::Model mlp(const MlpOptions& o) {
  TANDEM_CHECK(o.width >= 1, "MlpOptions::width must be at least 1, not {}", o.width);
  TANDEM_CHECK(o.blocks >= 0, "MlpOptions::blocks must be at least 0, not {}", o.blocks);
  graph::Model m;
  m.name = "mlp";
  m.layers.push_back(flatten_layer("flatten", "input", "x"));
  m.layers.push_back(linear_layer("dense0", o.inputs, o.width, true, "x", "h0"));
  std::string prev = "h0";
  for (int b = 0; b < o.blocks; ++b) {
    for (int k = 0; k < 2; ++k) {
      std::string name = fmt::format("block{}.dense{}", b, k);
      std::string out = fmt::format("h{}_{}", b, k);
      m.layers.push_back(linear_layer(name, o.width, o.width, true, prev, out));
      prev = out;
    }
  }
  m.layers.push_back(dropout_layer("dropout", o.dropout, prev, "dropped"));
  m.layers.push_back(linear_layer("logits", o.width, o.classes, false, "dropped", "output"));
  m.loss = cross_entropy_loss;
  m.prediction = [](const torch::Tensor& scores) { return torch::softmax(scores, 1); };
  m.metric = correct_predictions;
  m.metric_name = "accuracy";
  return m;
}

}  // namespace tandem::models
