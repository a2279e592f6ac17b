#include "tandem/models/conv3d_stack.h"

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/conv.h>

#include "tandem/common/check.h"
#include "tandem/models/relu.h"
#include "tandem/models/split_conv.h"
#include "tandem/models/transposed_product.h"
#include "tandem/spatial/group_sum.h"

namespace tandem::models {

graph::Layer conv3d_layer(std::string name, int64_t in, int64_t out, int64_t kernel, bool relu,
                          std::string input, std::string output, int64_t voxels) {
  torch::nn::Conv3d conv(torch::nn::Conv3dOptions(in, out, kernel).padding(kernel / 2));
  graph::Layer l;
  l.name = std::move(name);
  l.module = conv.ptr();
  const int64_t padding = kernel / 2;
  l.bind = [relu, padding](const std::shared_ptr<torch::nn::Module>& module) -> graph::ForwardFn {
    torch::nn::Conv3d conv(std::dynamic_pointer_cast<torch::nn::Conv3dImpl>(module));
    return [conv, relu, padding](const graph::Tensors& x) {
      // In place: the convolution keeps its input, not its output, so the output's memory can
      // hold the activation (one tensor of the layer's output size less at a time), and the
      // activation's backward can overwrite its incoming gradient (relu.h).
      // Under bf16 on CPU devices a one-voxel kernel is a matrix product (transposed_product.h).
      torch::Tensor y = pointwise_conv_as_product_here(x[0], conv->weight)
                            ? pointwise_conv_as_product(x[0], conv->weight, conv->bias)
                            : split_conv3d(x[0], conv->weight, conv->bias, padding);
      return graph::Tensors{relu ? relu_in_place_with_gradient_in_place(y) : y};
    };
  };
  l.forward = l.bind(l.module);
  l.splits_backward = true;
  l.inputs = {std::move(input)};
  l.outputs = {std::move(output)};
  l.forward_flops_per_sample = 2.0 * static_cast<double>(in) * static_cast<double>(out) *
                               static_cast<double>(kernel * kernel * kernel) *
                               static_cast<double>(voxels);
  return l;
}

graph::Model conv3d_stack(const Conv3dStackOptions& o) {
  TANDEM_CHECK(o.convs >= 1, "the Conv3D stack needs at least 1 convolution, not {}", o.convs);
  TANDEM_CHECK(o.filters >= 1, "the Conv3D stack needs at least 1 filter, not {}", o.filters);
  TANDEM_CHECK(o.in_channels >= 1, "the Conv3D stack needs at least 1 input channel, not {}",
               o.in_channels);
  TANDEM_CHECK(o.volume >= 0, "the volume side must be positive (or 0: unknown), not {}", o.volume);
  const int64_t voxels = o.volume * o.volume * o.volume;
  graph::Model m;
  m.name = "conv3d";
  std::string prev = m.input;
  for (int i = 0; i < o.convs; ++i) {
    const bool last = i == o.convs - 1;
    const std::string out = last ? m.output : fmt::format("h{}", i);
    m.layers.push_back(conv3d_layer(fmt::format("conv{}", i), i == 0 ? o.in_channels : o.filters,
                                    last ? 1 : o.filters, 3, /*relu=*/!last, prev, out, voxels));
    prev = out;
  }
  m.loss = mse_loss;
  m.metric = mse_per_sample_sum;
  m.metric_name = "mse";
  m.slab_dim = 2;  // depth of [B,C,D,H,W]
  return m;
}

}  // namespace tandem::models
