// Dropout (tandem's keyed dropout: the same masks under any schedule, partition, device
// count and recomputation) and Constant.
#include "ops.h"
#include "tandem/models/layers.h"

namespace tandem::onnx::detail {

Op make_dropout(const Node& n) {
  double ratio = 0.5;
  if (n.opset() >= 12) {
    if (n.has_input(1)) ratio = n.constant(1, "ratio").item<double>();
  } else {
    ratio = n.get_float("ratio", 0.5f);
  }
  if (!(ratio >= 0 && ratio < 1)) n.refuse(fmt::format("ratio {} is outside [0, 1)", ratio));
  // training_mode (input 2) says how the graph was exported; tandem's own training and
  // evaluation decide whether masks are drawn.
  models::KeyedDropout dropout(ratio);
  Op op;
  op.fn = [dropout](const graph::Tensors& in) mutable {
    return graph::Tensors{dropout->forward(in[0])};
  };
  return op;
}

Op make_constant(const Node& n) {
  torch::Tensor value;
  if (n.has("value")) {
    value = n.get_tensor("value");
  } else if (n.has("value_float")) {
    value = torch::tensor(n.get_float("value_float", 0));
  } else if (n.has("value_floats")) {
    value = torch::tensor(n.get_floats("value_floats"));
  } else if (n.has("value_int")) {
    value = torch::tensor(n.get_int("value_int", 0));
  } else if (n.has("value_ints")) {
    value = torch::tensor(n.get_ints("value_ints"));
  } else {
    n.refuse("its value is neither a tensor nor numbers (sparse and string constants are not "
             "supported)");
  }
  Op op;
  op.fn = [value](const graph::Tensors&) { return graph::Tensors{value}; };
  return op;
}

}  // namespace tandem::onnx::detail
