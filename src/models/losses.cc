#include "tandem/models/losses.h"

#include <torch/nn/functional/loss.h>

#include "tandem/common/check.h"
#include "tandem/spatial/group_sum.h"

namespace tandem::models {
namespace {

void check_same_shape(const char* what, const torch::Tensor& output, const torch::Tensor& target) {
  TANDEM_CHECK(output.sizes() == target.sizes() && output.dim() >= 2,
               "the {} needs output and target of the same shape [B,...], not [{}] and [{}]", what,
               fmt::join(output.sizes(), ","), fmt::join(target.sizes(), ","));
}

}  // namespace

torch::Tensor cross_entropy_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
}

double correct_predictions(const torch::Tensor& logits, const torch::Tensor& labels) {
  return logits.argmax(1).eq(labels).sum().item<double>();
}

torch::Tensor mse_loss(const torch::Tensor& output, const torch::Tensor& target) {
  TANDEM_CHECK(output.sizes() == target.sizes(),
               "the MSE loss needs output and target of the same shape, not [{}] and [{}]",
               fmt::join(output.sizes(), ","), fmt::join(target.sizes(), ","));
  if (spatial::split()) {
    const torch::Tensor sum = spatial::group_sum((output - target).square().sum());
    return sum / static_cast<double>(output.size(0) * spatial::whole_elements_per_sample(output));
  }
  return torch::nn::functional::mse_loss(output, target);
}

double mse_per_sample_sum(const torch::Tensor& output, const torch::Tensor& target) {
  if (spatial::split()) {
    const torch::Tensor sums = spatial::group_sum(
        (output.detach() - target).square().flatten(1).sum(1).to(torch::kFloat64));  // [B]
    return (sums / static_cast<double>(spatial::whole_elements_per_sample(output)))
        .sum()
        .item<double>();
  }
  return (output - target).square().flatten(1).mean(1).sum().item<double>();
}

torch::Tensor soft_dice_loss(const torch::Tensor& output, const torch::Tensor& target) {
  check_same_shape("Dice loss", output, target);
  const torch::Tensor p = output.flatten(1);  // [B,N]
  const torch::Tensor t = target.flatten(1).to(p.dtype());
  torch::Tensor dice;  // [B]
  if (spatial::split()) {
    // The sums run over the whole sample: each slab's partial sums, added over the group.
    const torch::Tensor sums =
        spatial::group_sum(torch::stack({(p * t).sum(1), p.sum(1), t.sum(1)}));  // [3,B]
    dice = (2 * sums[0] + 1) / (sums[1] + sums[2] + 1);
  } else {
    dice = (2 * (p * t).sum(1) + 1) / (p.sum(1) + t.sum(1) + 1);
  }
  return (1 - dice).mean();
}

torch::Tensor bce_loss(const torch::Tensor& output, const torch::Tensor& target) {
  check_same_shape("binary cross-entropy", output, target);
  namespace F = torch::nn::functional;
  if (spatial::split()) {
    const torch::Tensor sum = spatial::group_sum(
        F::binary_cross_entropy(output, target.to(output.dtype()),
                                F::BinaryCrossEntropyFuncOptions().reduction(torch::kSum)));
    return sum / static_cast<double>(output.size(0) * spatial::whole_elements_per_sample(output));
  }
  return F::binary_cross_entropy(output, target.to(output.dtype()));
}

double hard_dice_sum(const torch::Tensor& output, const torch::Tensor& target) {
  check_same_shape("Dice score", output, target);
  const torch::Tensor p = output.detach().flatten(1).gt(0.5).to(torch::kFloat64);  // [B,N]
  const torch::Tensor t = target.flatten(1).gt(0.5).to(torch::kFloat64);
  torch::Tensor both = (p * t).sum(1);
  torch::Tensor total = p.sum(1) + t.sum(1);
  if (spatial::split()) {
    const torch::Tensor sums = spatial::group_sum(torch::stack({both, total}));  // [2,B]
    both = sums[0];
    total = sums[1];
  }
  // Both masks empty: a perfect answer, score 1 (and no division by 0).
  const torch::Tensor dice =
      torch::where(total > 0, 2 * both / total.clamp_min(1), torch::ones_like(total));
  return dice.sum().item<double>();
}

}  // namespace tandem::models
