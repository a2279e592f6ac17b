#include "loss.h"

#include <torch/nn/functional/loss.h>

#include "tandem/models/conv3d_stack.h"
#include "tandem/models/unet3d.h"
#include "tandem/spatial/group_sum.h"

namespace tandem::onnx::detail {
namespace {

namespace F = torch::nn::functional;

// Class indices [B,...] for scores [B,C,...]: a [B,1,...] mask loses its channel axis.
torch::Tensor class_target(const torch::Tensor& scores, const torch::Tensor& target) {
  torch::Tensor t = target;
  if (t.dim() == scores.dim() && t.dim() >= 2 && t.size(1) == 1) t = t.squeeze(1);
  return t.to(torch::kLong);
}

// Positions per sample of scores [B,C,...] over the whole volume (on a slab: the whole
// sample's, not the slab's).
double whole_positions(const torch::Tensor& scores) {
  return static_cast<double>(spatial::whole_elements_per_sample(scores) / scores.size(1));
}

graph::LossFn cross_entropy(bool) {
  // Log-softmax over axis 1 of the scores (logits or log-probabilities alike); the mean over
  // the samples and their positions, which on slabs is the slabs' sums added up.
  return [](const torch::Tensor& scores, const torch::Tensor& target) {
    if (!spatial::split()) return F::cross_entropy(scores, class_target(scores, target));
    const torch::Tensor sum = spatial::group_sum(F::cross_entropy(
        scores, class_target(scores, target), F::CrossEntropyFuncOptions().reduction(torch::kSum)));
    return sum / (static_cast<double>(scores.size(0)) * whole_positions(scores));
  };
}

graph::MetricFn accuracy(bool) {
  // Per sample: the share of its positions classified right (1 or 0 for one label), summed.
  return [](const torch::Tensor& scores, const torch::Tensor& target) {
    const torch::Tensor right =
        scores.detach().argmax(1).eq(class_target(scores, target)).to(torch::kFloat64);
    if (right.dim() == 1) return right.sum().item<double>();
    if (!spatial::split()) return right.flatten(1).mean(1).sum().item<double>();
    const torch::Tensor per_sample = spatial::group_sum(right.flatten(1).sum(1));  // [B]
    return (per_sample / whole_positions(scores)).sum().item<double>();
  };
}

graph::LossFn mse(bool) { return models::mse_loss; }
graph::MetricFn mse_metric(bool) { return models::mse_per_sample_sum; }

torch::Tensor probabilities(const torch::Tensor& output, bool logits) {
  return logits ? torch::sigmoid(output) : output;
}

graph::LossFn dice(bool logits) {
  return [logits](const torch::Tensor& output, const torch::Tensor& target) {
    return models::soft_dice_loss(probabilities(output, logits), target);
  };
}

graph::LossFn dice_bce(bool logits) {
  return [logits](const torch::Tensor& output, const torch::Tensor& target) {
    const torch::Tensor dice = models::soft_dice_loss(probabilities(output, logits), target);
    if (!logits) return dice + models::bce_loss(output, target);
    if (!spatial::split())
      return dice + F::binary_cross_entropy_with_logits(output, target.to(output.dtype()));
    const torch::Tensor sum = spatial::group_sum(F::binary_cross_entropy_with_logits(
        output, target.to(output.dtype()),
        F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum)));
    return dice +
           sum / static_cast<double>(output.size(0) * spatial::whole_elements_per_sample(output));
  };
}

graph::MetricFn dice_metric(bool logits) {
  return [logits](const torch::Tensor& output, const torch::Tensor& target) {
    return models::hard_dice_sum(probabilities(output.detach(), logits), target);
  };
}

// Class scores (logits or log-probabilities alike) as probabilities over axis 1.
graph::PredictionFn class_probabilities(bool) {
  return [](const torch::Tensor& scores) { return torch::softmax(scores, 1); };
}

// A mask's probabilities: the output itself, or the sigmoid of what the loss took over.
graph::PredictionFn mask_probabilities(bool logits) {
  if (!logits) return nullptr;
  return [](const torch::Tensor& output) { return torch::sigmoid(output); };
}

graph::PredictionFn values(bool) { return nullptr; }

const std::vector<LossEntry>& table() {
  static const std::vector<LossEntry> entries = {
      {"cross-entropy", {"Softmax", "LogSoftmax"}, cross_entropy, accuracy, "accuracy",
       class_probabilities},
      {"dice", {"Sigmoid"}, dice, dice_metric, "dice", mask_probabilities},
      {"dice+bce", {"Sigmoid"}, dice_bce, dice_metric, "dice", mask_probabilities},
      {"mse", {}, mse, mse_metric, "mse", values},
  };
  return entries;
}

}  // namespace

const LossEntry* find_loss(const std::string& name) {
  for (const LossEntry& e : table())
    if (name == e.name) return &e;
  return nullptr;
}

std::vector<std::string> loss_names() {
  std::vector<std::string> names;
  for (const LossEntry& e : table()) names.emplace_back(e.name);
  return names;
}

}  // namespace tandem::onnx::detail
