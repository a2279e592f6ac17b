// BatchNormalization (see batch_norm.h for micro-batches) and InstanceNormalization (per
// sample and channel over the spatial axes: exact for any split of the batch).
// Shapes: x [B,C,...]; scale, bias, mean, var [C].
#include "batch_norm.h"
#include "ops.h"

namespace tandem::onnx::detail {

Op make_batch_normalization(const Node& n) {
  // training_mode (opset 14 on) only says how the graph was exported: tandem's own training
  // and evaluation choose the statistics. Its extra outputs (updated running statistics) are
  // not computed, and the loader refuses graphs that read them.
  const double epsilon = n.get_float("epsilon", 1e-5f);
  const double momentum = n.get_float("momentum", 0.9f);
  // PyTorch's BatchNorm counts its updates in a buffer next to its running mean; keep one
  // under that name, so that the trained state dict loads into the PyTorch module.
  torch::Tensor tracked;
  const std::string mean_name = n.input_name(3);
  const std::string suffix = "running_mean";
  if (mean_name.size() >= suffix.size() &&
      mean_name.compare(mean_name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    tracked = n.add_buffer(mean_name.substr(0, mean_name.size() - suffix.size()) +
                               "num_batches_tracked",
                           torch::zeros({}, torch::kInt64));
  }
  auto norm = std::make_shared<DeferredBatchNorm>(epsilon, momentum);
  Op op;
  op.fn = [norm, tracked](const graph::Tensors& in) {
    return graph::Tensors{norm->forward(in[0], in[1], in[2], in[3], in[4], tracked)};
  };
  return op;
}

Op make_instance_normalization(const Node& n) {
  const double epsilon = n.get_float("epsilon", 1e-5f);
  Op op;
  op.fn = [epsilon](const graph::Tensors& in) {
    return graph::Tensors{torch::instance_norm(in[0], in[1], in[2], torch::Tensor(),
                                               torch::Tensor(), /*use_input_stats=*/true, 0.0,
                                               epsilon, /*cudnn_enabled=*/true)};
  };
  return op;
}

}  // namespace tandem::onnx::detail
