// Pooling over 1 to 3 spatial axes of x [B,C,D...]: MaxPool, AveragePool (both with pads,
// strides, ceil_mode and auto_pad) and GlobalAveragePool ([B,C,D...] -> [B,C,1...]).
#include "ops.h"
#include "tandem/models/block_max.h"
#include "window.h"

namespace tandem::onnx::detail {
namespace {

torch::Tensor max_pool(const torch::Tensor& x, const Window& w, std::vector<int64_t> padding,
                       bool ceil_mode) {
  switch (x.dim()) {
    case 3:
      return torch::max_pool1d(x, w.kernel, w.strides, padding, w.dilations, ceil_mode);
    case 4:
      return torch::max_pool2d(x, w.kernel, w.strides, padding, w.dilations, ceil_mode);
    default:
      return torch::max_pool3d(x, w.kernel, w.strides, padding, w.dilations, ceil_mode);
  }
}

torch::Tensor avg_pool(const torch::Tensor& x, const Window& w, std::vector<int64_t> padding,
                       bool ceil_mode, bool count_include_pad) {
  switch (x.dim()) {
    case 3:
      return torch::avg_pool1d(x, w.kernel, w.strides, padding, ceil_mode, count_include_pad);
    case 4:
      return torch::avg_pool2d(x, w.kernel, w.strides, padding, ceil_mode, count_include_pad);
    default:
      return torch::avg_pool3d(x, w.kernel, w.strides, padding, ceil_mode, count_include_pad);
  }
}

// LibTorch pads symmetrically by at most half the kernel; other paddings are applied first.
bool torch_pads(const Padding& p, const Window& w) {
  if (!p.symmetric()) return false;
  for (size_t i = 0; i < p.begin.size(); ++i)
    if (p.begin[i] > w.kernel[i] / 2) return false;
  return true;
}

// Whether the windows tile the input: each kernel extent equal to its stride, no dilation or
// padding, and ceil rounding (if asked for) adds no partial window.
bool tiles(const Window& w, const Padding& p, c10::IntArrayRef spatial, bool ceil_mode) {
  for (size_t i = 0; i < w.kernel.size(); ++i) {
    if (w.strides[i] != w.kernel[i] || w.dilations[i] != 1 || p.begin[i] != 0 || p.end[i] != 0)
      return false;
    if (ceil_mode && spatial[i] % w.kernel[i] != 0) return false;
  }
  return true;
}

Window pool_window(const Node& n) {
  Window w = read_window(n);
  if (w.kernel.empty()) n.refuse("it has no kernel_shape");
  return w;
}

}  // namespace

Op make_max_pool(const Node& n) {
  const Window window = pool_window(n);
  const bool ceil_mode = n.get_int("ceil_mode", 0) != 0;
  if (n.get_int("storage_order", 0) != 0)
    n.refuse("storage_order=1 (column-major) is not supported");
  const std::string name = n.name();
  Op op;
  op.fn = [=](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    check_spatial(name, "MaxPool", x);
    const size_t dims = static_cast<size_t>(x.dim() - 2);
    const Window w = window.filled(dims, {});
    const Padding p = resolve_padding(w, x.sizes().slice(2));
    if (tiles(w, p, x.sizes().slice(2), ceil_mode) && models::block_max_pool_here(x, w.kernel))
      return graph::Tensors{models::block_max_pool(x, w.kernel)};
    if (torch_pads(p, w)) return graph::Tensors{max_pool(x, w, p.begin, ceil_mode)};
    const double lowest = -std::numeric_limits<double>::infinity();
    return graph::Tensors{
        max_pool(pad_spatial(x, p, lowest), w, std::vector<int64_t>(dims, 0), ceil_mode)};
  };
  return op;
}

Op make_average_pool(const Node& n) {
  const Window window = pool_window(n);
  if (n.has("dilations")) n.refuse("dilations are not supported for average pooling");
  const bool ceil_mode = n.get_int("ceil_mode", 0) != 0;
  const bool count_pad = n.get_int("count_include_pad", 0) != 0;
  const std::string name = n.name();
  Op op;
  op.fn = [=](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    check_spatial(name, "AveragePool", x);
    const size_t dims = static_cast<size_t>(x.dim() - 2);
    const Window w = window.filled(dims, {});
    const Padding p = resolve_padding(w, x.sizes().slice(2));
    if (torch_pads(p, w)) return graph::Tensors{avg_pool(x, w, p.begin, ceil_mode, count_pad)};
    const std::vector<int64_t> none(dims, 0);
    const torch::Tensor sums = avg_pool(pad_spatial(x, p, 0.0), w, none, ceil_mode, true);
    if (count_pad) return graph::Tensors{sums};
    // Divide by the number of input (not padding) elements under each window.
    std::vector<int64_t> one_shape(static_cast<size_t>(x.dim()), 1);
    for (int64_t i = 2; i < x.dim(); ++i) one_shape[static_cast<size_t>(i)] = x.size(i);
    const torch::Tensor ones = torch::ones(one_shape, x.options());
    const torch::Tensor counts = avg_pool(pad_spatial(ones, p, 0.0), w, none, ceil_mode, true);
    return graph::Tensors{sums / counts};
  };
  return op;
}

Op make_global_average_pool(const Node& n) {
  const std::string name = n.name();
  Op op;
  op.fn = [name](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    check_spatial(name, "GlobalAveragePool", x);
    std::vector<int64_t> dims;
    for (int64_t i = 2; i < x.dim(); ++i) dims.push_back(i);
    return graph::Tensors{x.mean(dims, /*keepdim=*/true)};
  };
  return op;
}

}  // namespace tandem::onnx::detail
