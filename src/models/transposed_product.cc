#include "tandem/models/transposed_product.h"

#include <vector>

#include "tandem/common/check.h"
#include "tandem/graph/precision.h"

namespace tandem::models {

bool transposed_conv_as_product_here(const torch::Tensor& x, const torch::Tensor& weight,
                                     at::IntArrayRef strides) {
  if (!x.is_cpu() || graph::autocast_type_here(x.device()) == c10::kFloat || x.dim() < 3 ||
      x.dim() > 5 || weight.dim() != x.dim() || static_cast<int64_t>(strides.size()) != x.dim() - 2)
    return false;
  for (int64_t i = 0; i < x.dim() - 2; ++i)
    if (weight.size(i + 2) != strides[static_cast<size_t>(i)]) return false;
  return true;
}

torch::Tensor transposed_conv_as_product(const torch::Tensor& x, const torch::Tensor& weight,
                                         const torch::Tensor& bias) {
  const int64_t dims = x.dim() - 2;
  TANDEM_CHECK(dims >= 1 && dims <= 3 && weight.dim() == x.dim() && weight.size(0) == x.size(1),
               "a transposed convolution of x [{}] by a weight [{}]", fmt::join(x.sizes(), ","),
               fmt::join(weight.sizes(), ","));
  const int64_t in = weight.size(0), out = weight.size(1);
  const int64_t block = weight.numel() / (in * out);
  // [B, S..., in] rows, one per input voxel.
  std::vector<int64_t> to_rows{0};
  for (int64_t i = 0; i < dims; ++i) to_rows.push_back(i + 2);
  to_rows.push_back(1);
  const torch::Tensor rows = x.permute(to_rows).reshape({-1, in});
  const torch::Tensor w = weight.reshape({in, out * block});
  const torch::Tensor y =
      bias.defined() ? torch::addmm(bias.repeat_interleave(block), rows, w) : torch::mm(rows, w);
  // [B, S..., out, k...] -> [B, out, S0, k0, S1, k1, ...] -> [B, out, S0 k0, S1 k1, ...].
  std::vector<int64_t> blocks{x.size(0)};
  for (int64_t i = 0; i < dims; ++i) blocks.push_back(x.size(i + 2));
  blocks.push_back(out);
  for (int64_t i = 0; i < dims; ++i) blocks.push_back(weight.size(i + 2));
  std::vector<int64_t> order{0, dims + 1};
  std::vector<int64_t> shape{x.size(0), out};
  for (int64_t i = 0; i < dims; ++i) {
    order.push_back(1 + i);
    order.push_back(dims + 2 + i);
    shape.push_back(x.size(i + 2) * weight.size(i + 2));
  }
  return y.view(blocks).permute(order).reshape(shape);
}

bool pointwise_conv_as_product_here(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!x.is_cpu() || graph::autocast_type_here(x.device()) == c10::kFloat || x.dim() < 3 ||
      weight.dim() != x.dim() || weight.size(1) != x.size(1))
    return false;
  for (int64_t i = 2; i < weight.dim(); ++i)
    if (weight.size(i) != 1) return false;
  return true;
}

torch::Tensor pointwise_conv_as_product(const torch::Tensor& x, const torch::Tensor& weight,
                                        const torch::Tensor& bias) {
  TANDEM_CHECK(x.dim() >= 3 && weight.dim() == x.dim() && weight.size(1) == x.size(1),
               "a pointwise convolution of x [{}] by a weight [{}]", fmt::join(x.sizes(), ","),
               fmt::join(weight.sizes(), ","));
  const int64_t samples = x.size(0), out = weight.size(0), in = weight.size(1);
  const torch::Tensor columns = x.flatten(2);  // [B, in, voxels]
  // One batched product, not one product per sample: each sample's select would, in the
  // backward, make a zero tensor of the whole input for its gradient (three inputs' bytes at once
  // for two samples, where this holds one).
  const torch::Tensor w = weight.flatten(1).expand({samples, out, in});
  const torch::Tensor y =
      bias.defined()
          ? torch::baddbmm(bias.view({1, out, 1}).expand({samples, out, columns.size(2)}), w,
                           columns)
          : torch::bmm(w, columns);
  std::vector<int64_t> shape = x.sizes().vec();
  shape[1] = out;
  return y.view(shape);
}

}  // namespace tandem::models
