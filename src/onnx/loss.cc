#include "loss.h"

#include <torch/nn/functional/loss.h>

#include "tandem/models/conv3d_stack.h"
#include "tandem/models/unet3d.h"

namespace tandem::onnx::detail {
namespace {

namespace F = torch::nn::functional;

// Class indices [B,...] for scores [B,C,...]: a [B,1,...] mask loses its channel axis.
torch::Tensor class_target(const torch::Tensor& scores, const torch::Tensor& target) {
  torch::Tensor t = target;
  if (t.dim() == scores.dim() && t.dim() >= 2 && t.size(1) == 1) t = t.squeeze(1);
  return t.to(torch::kLong);
}

graph::LossFn cross_entropy(bool) {
  // Log-softmax over axis 1 of the scores (logits or log-probabilities alike).
  return [](const torch::Tensor& scores, const torch::Tensor& target) {
    return F::cross_entropy(scores, class_target(scores, target));
  };
}

graph::MetricFn accuracy(bool) {
  // Per sample: the share of its positions classified right (1 or 0 for one label), summed.
  return [](const torch::Tensor& scores, const torch::Tensor& target) {
    const torch::Tensor right =
        scores.detach().argmax(1).eq(class_target(scores, target)).to(torch::kFloat64);
    return right.dim() == 1 ? right.sum().item<double>()
                            : right.flatten(1).mean(1).sum().item<double>();
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
    return dice + F::binary_cross_entropy_with_logits(output, target.to(output.dtype()));
  };
}

graph::MetricFn dice_metric(bool logits) {
  return [logits](const torch::Tensor& output, const torch::Tensor& target) {
    return models::hard_dice_sum(probabilities(output.detach(), logits), target);
  };
}

const std::vector<LossEntry>& table() {
  static const std::vector<LossEntry> entries = {
      {"cross-entropy", {"Softmax", "LogSoftmax"}, cross_entropy, accuracy, "accuracy"},
      {"dice", {"Sigmoid"}, dice, dice_metric, "dice"},
      {"dice+bce", {"Sigmoid"}, dice_bce, dice_metric, "dice"},
      {"mse", {}, mse, mse_metric, "mse"},
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
