#include "tandem/models/depth_fold.h"

#include <ATen/Context.h>
#include <torch/torch.h>

namespace tandem::models {

namespace {

// ATen's ConvParams::use_mkldnn takes a single sample on the CPU only above this C*D*H.
constexpr int64_t kOneDnnSingleSampleVoxels = 20480;

}  // namespace

std::optional<DepthFold> DepthFold::of(const torch::Tensor& x, const torch::Tensor& weight,
                                       int64_t depth_padding, int64_t padding) {
  if (x.dim() != 5 || weight.dim() != 5 || x.size(0) != 1 || !x.device().is_cpu() ||
      x.scalar_type() != torch::kFloat || weight.scalar_type() != torch::kFloat)
    return std::nullopt;
  if (!at::hasMKLDNN() || !at::globalContext().userEnabledMkldnn()) return std::nullopt;
  if (x.size(1) * x.size(2) * x.size(3) > kOneDnnSingleSampleVoxels) return std::nullopt;
  const int64_t kernel = weight.size(2);
  // A 1x1x1 kernel has no im2col to avoid: LibTorch's path is one matrix product, which the
  // slabs' copies would only slow down.
  if (kernel == 1 && weight.size(3) == 1 && weight.size(4) == 1) return std::nullopt;
  if (x.size(2) + 2 * depth_padding - kernel + 1 < 2) return std::nullopt;
  return DepthFold(x.size(2), depth_padding, padding, kernel);
}

DepthFold::DepthFold(int64_t depth, int64_t depth_padding, int64_t padding, int64_t kernel)
    : depth_(depth),
      depth_padding_(depth_padding),
      padding_(padding),
      out_depth_(depth + 2 * depth_padding - kernel + 1),
      half_((out_depth_ + 1) / 2),
      slab_(half_ + kernel - 1) {}

torch::Tensor DepthFold::slabs(const torch::Tensor& x) const {
  // Rows [0, half + slab) of x padded along depth: `depth_padding` zero rows in front, the rest
  // behind.
  const int64_t behind = half_ + slab_ - depth_ - depth_padding_;
  const torch::Tensor padded =
      depth_padding_ == 0 && behind == 0
          ? x
          : torch::constant_pad_nd(x, {0, 0, 0, 0, depth_padding_, behind});
  return torch::cat({padded.narrow(2, 0, slab_), padded.narrow(2, half_, slab_)}, 0);
}

torch::Tensor DepthFold::join(const torch::Tensor& halves) const {
  torch::Tensor whole = torch::cat({halves.narrow(0, 0, 1), halves.narrow(0, 1, 1)}, 2);
  return 2 * half_ == out_depth_ ? whole : whole.narrow(2, 0, out_depth_).contiguous();
}

torch::Tensor DepthFold::split(const torch::Tensor& grad_output) const {
  const torch::Tensor padded =
      torch::constant_pad_nd(grad_output, {0, 0, 0, 0, 0, 2 * half_ - out_depth_});
  return torch::cat({padded.narrow(2, 0, half_), padded.narrow(2, half_, half_)}, 0);
}

torch::Tensor DepthFold::add_slabs(const torch::Tensor& grad_slabs) const {
  std::vector<int64_t> sizes = grad_slabs.sizes().vec();
  sizes[0] = 1;
  sizes[2] = half_ + slab_;
  torch::Tensor padded = torch::zeros(sizes, grad_slabs.options());
  padded.narrow(2, 0, slab_).add_(grad_slabs.narrow(0, 0, 1));
  padded.narrow(2, half_, slab_).add_(grad_slabs.narrow(0, 1, 1));
  return padded.narrow(2, depth_padding_, depth_).contiguous();
}

}  // namespace tandem::models
