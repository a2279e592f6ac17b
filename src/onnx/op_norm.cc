// BatchNormalization (see batch_norm.h for micro-batches) and InstanceNormalization (per
// sample and channel over the spatial axes: exact for any split of the batch; on the slabs of a
// spatial split its statistics are summed over the slabs).
// Shapes: x [B,C,...]; scale, bias, mean, var [C].
#include "batch_norm.h"
#include "ops.h"
#include "tandem/spatial/group_sum.h"

namespace tandem::onnx::detail {
namespace {

// Instance normalization of a slab x [B,C,D,...] of every sample: the mean and the (biased)
// variance of each sample and channel over the whole volume, from the slabs' partial sums
// (in double, two passes), then x normalized, scaled and shifted.
torch::Tensor slab_instance_norm(const torch::Tensor& x, const torch::Tensor& scale,
                                 const torch::Tensor& bias, double epsilon) {
  const double n = static_cast<double>(spatial::whole_elements_per_sample(x) / x.size(1));
  const torch::Tensor v = x.flatten(2);  // [B,C,N]
  const torch::Tensor mean = spatial::group_sum_shared(v.to(torch::kFloat64).sum(2)) / n;
  const torch::Tensor centered = v - mean.to(v.dtype()).unsqueeze(2);
  const torch::Tensor var =
      spatial::group_sum_shared(centered.to(torch::kFloat64).square().sum(2)) / n;
  std::vector<int64_t> per_channel(static_cast<size_t>(x.dim()), 1);
  per_channel[1] = x.size(1);
  const torch::Tensor y =
      (centered * (var + epsilon).rsqrt().to(v.dtype()).unsqueeze(2)).reshape(x.sizes());
  return y * scale.reshape(per_channel) + bias.reshape(per_channel);
}

}  // namespace

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
    if (spatial::split()) return graph::Tensors{slab_instance_norm(in[0], in[1], in[2], epsilon)};
    return graph::Tensors{torch::instance_norm(in[0], in[1], in[2], torch::Tensor(),
                                               torch::Tensor(), /*use_input_stats=*/true, 0.0,
                                               epsilon, /*cudnn_enabled=*/true)};
  };
  return op;
}

}  // namespace tandem::onnx::detail
