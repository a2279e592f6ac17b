// A linear map y = x W^T + b whose backward can split: the input gradient g W is returned to
// autograd at once, while the weight gradients (g^T x, sum of g) are pushed onto the current
// micro-batch's deferred queue when it is deferring (graph/deferred.h), to be run by the W
// action. Otherwise it behaves exactly like torch::nn::functional::linear.
// Shapes: x [..., in], weight [out, in], bias [out] (may be undefined), y [..., out].
#pragma once

#include <torch/types.h>

namespace tandem::models {

torch::Tensor split_linear(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias);

}  // namespace tandem::models
