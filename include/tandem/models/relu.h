#pragma once

#include <torch/torch.h>

namespace tandem::models {

// relu_(z) whose backward writes the input's gradient into the incoming gradient's memory where
// nothing else can see that memory (one tensor of it alone, dense, of the output's shape and
// type, and no graph being built for a second derivative); otherwise it makes a new one as
// LibTorch's relu does. The values are LibTorch's threshold_backward's either way: only the
// backward's peak changes, by one tensor of the layer's output size. z must be a tensor no
// autograd node keeps (a convolution's output): it becomes the result, as with relu_.
torch::Tensor relu_in_place_with_gradient_in_place(torch::Tensor z);

}  // namespace tandem::models
