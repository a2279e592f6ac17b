// Conv and ConvTranspose over 1 to 3 spatial axes: x [B,C_in,D...], weight [C_out,C_in/g,k...]
// (ConvTranspose: [C_in,C_out/g,k...]), optional bias [C_out]. Both map to at::convolution, the
// call PyTorch's own Conv and ConvTranspose modules make, so an exported module computes here
// what it computed in PyTorch. On the slabs of a spatial split a stride-1 Conv exchanges halos
// along the depth; the other windows slab_rules.cc lets through keep to the slab.
#include <ATen/ops/convolution_backward.h>

#include "ops.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/precision.h"
#include "tandem/models/split_conv.h"
#include "tandem/models/transposed_product.h"
#include "tandem/spatial/forward_chunks.h"
#include "tandem/spatial/group_sum.h"
#include "tandem/spatial/halo_conv.h"
#include "window.h"

namespace tandem::onnx::detail {
namespace {

// Multiply-adds per sample: 2 x (C_in/g) x C_out x kernel volume x output positions, from the
// weight and output shapes when shape inference knows them (ConvTranspose: per input position).
double conv_flops(const Node& n, bool transposed) {
  const Shape& w = n.input_shape(1);
  const Shape& positions = transposed ? n.input_shape(0) : n.output_shape(0);
  if (!w || !positions || positions->size() < 2) return 0;
  double weights = 1;
  for (int64_t d : *w) {
    if (d < 0) return 0;
    weights *= static_cast<double>(d);
  }
  const double channels = static_cast<double>((*positions)[1]);
  const double spatial = per_sample_elements(positions) / channels;
  return channels > 0 ? 2.0 * weights * spatial : 0;
}

// A transposed convolution through the per-dimension function that autocast lists, so that it
// computes in the type autocast's policy gives it on the device (on the CPU fp32: LibTorch 1.13's
// bf16 path there takes it for a forward convolution and fails).
torch::Tensor transposed_conv(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias, at::IntArrayRef strides,
                              at::IntArrayRef padding, at::IntArrayRef output_padding,
                              int64_t groups, at::IntArrayRef dilations) {
  switch (x.dim()) {
    case 3:
      return at::conv_transpose1d(x, weight, bias, strides, padding, output_padding, groups,
                                  dilations);
    case 4:
      return at::conv_transpose2d(x, weight, bias, strides, padding, output_padding, groups,
                                  dilations);
    default:
      TANDEM_CHECK(x.dim() == 5, "a transposed convolution of a tensor of {} dimensions", x.dim());
      return at::conv_transpose3d(x, weight, bias, strides, padding, output_padding, groups,
                                  dilations);
  }
}

// at::convolution with the node's geometry, and `depth_padding` along the first spatial axis
// (where a spatial split cuts): the call PyTorch's Conv modules make.
class AtenKernels : public spatial::ConvKernels {
 public:
  AtenKernels(std::vector<int64_t> strides, std::vector<int64_t> padding,
              std::vector<int64_t> dilations, int64_t groups)
      : strides_(std::move(strides)),
        padding_(std::move(padding)),
        dilations_(std::move(dilations)),
        groups_(groups) {}

  torch::Tensor forward(torch::Tensor x, const torch::Tensor& weight, const torch::Tensor& bias,
                        int64_t depth_padding, int64_t groups) const override {
    // aten::convolution is not on autocast's lists: its operands in autocast's type here.
    return at::convolution(graph::in_autocast_type(x), graph::in_autocast_type(weight),
                           graph::in_autocast_type(bias), strides_, padding_with(depth_padding),
                           dilations_, /*transposed=*/false, zeros(), groups_ * groups);
  }

  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> backward(
      const torch::Tensor& grad, const torch::Tensor& x, const torch::Tensor& weight,
      const torch::Tensor& bias, int64_t depth_padding, std::array<bool, 3> mask,
      int64_t groups) const override {
    std::vector<int64_t> bias_sizes{weight.size(0)};
    return at::convolution_backward(
        grad, x, weight, bias.defined() ? at::OptionalIntArrayRef(bias_sizes) : c10::nullopt,
        strides_, padding_with(depth_padding), dilations_, /*transposed=*/false, zeros(),
        groups_ * groups, {mask[0], mask[1], mask[2] && bias.defined()});
  }

 private:
  std::vector<int64_t> padding_with(int64_t depth_padding) const {
    std::vector<int64_t> p = padding_;
    p[0] = depth_padding;
    return p;
  }
  std::vector<int64_t> zeros() const { return std::vector<int64_t>(padding_.size(), 0); }

  std::vector<int64_t> strides_, padding_, dilations_;
  int64_t groups_;
};

Op conv(const Node& n) {
  const Window window = read_window(n);
  const int64_t groups = n.get_int("group", 1);
  const std::string name = n.name();
  Op op;
  op.flops_per_sample = conv_flops(n, false);
  op.fn = [window, groups, name](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    check_spatial(name, "Conv", x);
    const torch::Tensor& weight = in[1];
    const size_t dims = static_cast<size_t>(x.dim() - 2);
    const Window w = window.filled(dims, weight.sizes().slice(2));
    Padding p = resolve_padding(w, x.sizes().slice(2));
    torch::Tensor input = x;
    // A slab (slab_rules.cc checked for "same" padding along the depth): the neighbours'
    // planes, or zeros at the volume's two ends, stand in for the depth's padding.
    // Its passes run in chunks of planes, a kernel without reach along the depth (halo 0) too.
    const bool slab = spatial::split() && w.strides[0] == 1;
    const int64_t halo = slab ? p.begin[0] : 0;
    if (slab) p.begin[0] = p.end[0] = 0;
    std::vector<int64_t> padding = p.begin;
    if (!p.symmetric()) {
      input = pad_spatial(input, p, 0.0);
      padding.assign(dims, 0);
    }
    std::shared_ptr<const spatial::ConvKernels> kernels =
        std::make_shared<AtenKernels>(w.strides, padding, w.dilations, groups);
    const torch::Tensor bias = in.size() > 2 ? in[2] : torch::Tensor();
    if (slab) {
      return graph::Tensors{
          spatial::halo_conv(input, weight, bias, halo, std::move(kernels), /*may_defer=*/false)};
    }
    // Forward only on a whole volume: chunks of planes along the depth (forward_chunks.h), for
    // a kernel that reaches as far as the depth's padding on both sides.
    if (dims == 3 && w.strides[0] == 1 && w.dilations[0] == 1 &&
        weight.size(2) == 2 * padding[0] + 1 &&
        spatial::chunks_forward(input.numel() / input.size(1) * weight.size(0) *
                                input.element_size())) {
      return graph::Tensors{spatial::conv_in_chunks({input}, padding[0], [&](torch::Tensor piece) {
        return kernels->forward(std::move(piece), weight, bias, 0);
      })};
    }
    return graph::Tensors{kernels->forward(input, weight, bias, padding[0])};
  };
  return op;
}

Op conv_transpose(const Node& n) {
  const Window window = read_window(n);
  const int64_t groups = n.get_int("group", 1);
  const std::vector<int64_t> output_padding_attr = n.get_ints("output_padding");
  const std::vector<int64_t> output_shape = n.get_ints("output_shape");
  const std::string name = n.name();
  Op op;
  op.flops_per_sample = conv_flops(n, true);
  op.fn = [=](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    check_spatial(name, "ConvTranspose", x);
    const torch::Tensor& weight = in[1];
    const torch::Tensor bias = in.size() > 2 ? in[2] : torch::Tensor();
    const size_t dims = static_cast<size_t>(x.dim() - 2);
    Window w = window.filled(dims, weight.sizes().slice(2));
    std::vector<int64_t> output_padding =
        output_padding_attr.empty() ? std::vector<int64_t>(dims, 0) : output_padding_attr;
    // Padding: from output_shape (or auto_pad SAME: output = input x stride) by the formula of
    // the ONNX specification, else the pads attribute.
    Padding p;
    p.begin.assign(w.pads.begin(), w.pads.begin() + static_cast<int64_t>(dims));
    p.end.assign(w.pads.begin() + static_cast<int64_t>(dims), w.pads.end());
    const bool same = w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER";
    if (!output_shape.empty() || same) {
      for (size_t i = 0; i < dims; ++i) {
        const int64_t reach = (w.kernel[i] - 1) * w.dilations[i] + 1;
        const int64_t target = output_shape.empty()
                                   ? x.size(static_cast<int64_t>(i) + 2) * w.strides[i]
                                   : output_shape[output_shape.size() - dims + i];
        const int64_t total = w.strides[i] * (x.size(static_cast<int64_t>(i) + 2) - 1) +
                              output_padding[i] + reach - target;
        TANDEM_CHECK(total >= 0,
                     "ONNX node '{}' (ConvTranspose) asks for output size {} on spatial axis {}, "
                     "larger than its input can give",
                     name, target, i);
        const int64_t half = total / 2;
        p.begin[i] = w.auto_pad == "SAME_UPPER" ? half : total - half;
        p.end[i] = total - p.begin[i];
      }
    } else if (w.auto_pad == "VALID") {
      p.begin.assign(dims, 0);
      p.end.assign(dims, 0);
    }
    bool torch_path = p.symmetric();
    for (size_t i = 0; i < dims; ++i)
      torch_path = torch_path && output_padding[i] < std::max(w.strides[i], w.dilations[i]);
    if (torch_path) {
      // Under bf16 on CPU devices a kernel as large as its stride (no padding, dilation or
      // groups) is one matrix product in bf16 (models/transposed_product.h).
      bool product = groups == 1 && models::transposed_conv_as_product_here(x, weight, w.strides);
      for (size_t i = 0; i < dims; ++i)
        product = product && p.begin[i] == 0 && output_padding[i] == 0 && w.dilations[i] == 1;
      auto transposed = [&](const torch::Tensor& piece) {
        if (product) return models::transposed_conv_as_product(piece, weight, bias);
        return transposed_conv(piece, weight, bias, w.strides, p.begin, output_padding, groups,
                               w.dilations);
      };
      // Forward only, a kernel as deep as its stride and no padding along the depth: each input
      // plane gives its own output planes, so the volume goes in chunks (forward_chunks.h).
      const int64_t f = w.strides[0];
      if (dims == 3 && w.kernel[0] == f && w.dilations[0] == 1 && p.begin[0] == 0 &&
          output_padding[0] == 0 &&
          spatial::chunks_forward(
              x.numel() / x.size(1) * weight.size(1) * groups * f * f * f * x.element_size(),
              /*local=*/true))
        return graph::Tensors{spatial::local_in_chunks(x, f, transposed)};
      return graph::Tensors{transposed(x)};
    }
    // Asymmetric padding: the full output, output_padding more positions at the end of each
    // axis (they receive no input, only the bias), then the pads cut off, then the bias.
    torch::Tensor y =
        transposed_conv(x, weight, torch::Tensor(), w.strides, std::vector<int64_t>(dims, 0),
                        std::vector<int64_t>(dims, 0), groups, w.dilations);
    Padding crop;
    for (size_t i = 0; i < dims; ++i) {
      crop.begin.push_back(-p.begin[i]);
      crop.end.push_back(output_padding[i] - p.end[i]);
    }
    y = pad_spatial(y, crop, 0.0);
    if (bias.defined()) {
      std::vector<int64_t> shape(static_cast<size_t>(y.dim()), 1);
      shape[1] = bias.size(0);
      y = y + bias.reshape(shape);
    }
    return graph::Tensors{y};
  };
  return op;
}

}  // namespace

Op make_conv(const Node& n) { return conv(n); }
Op make_conv_transpose(const Node& n) { return conv_transpose(n); }

Op conv_of_concatenation(const Node& n, size_t parts, Op conv) {
  const Window window = read_window(n);
  const int64_t groups = n.get_int("group", 1);
  conv.fn = [window, groups, parts, fn = std::move(conv.fn)](const graph::Tensors& in) {
    const std::vector<torch::Tensor> xs(in.begin(), in.begin() + static_cast<int64_t>(parts));
    const torch::Tensor& weight = in[parts];
    const torch::Tensor bias = in.size() > parts + 1 ? in[parts + 1] : torch::Tensor();
    // The padding of a stride-1 "same" convolution of a cubic odd kernel, or -1. In fp32
    // without a workspace bound the concatenation is kept instead, as an unfolded Concat keeps
    // it: there the parts' way makes it again for a moment in the backward beside the parts it
    // keeps (the PyTorch U-Net of tests/onnx at 64^3 peaked 5% higher so).
    auto same_padding = [&]() -> int64_t {
      if (graph::current_call().workspace_bound == 0 &&
          graph::autocast_type_here(weight.device()) == c10::kFloat)
        return -1;
      if (groups != 1 || weight.dim() != 5) return -1;
      for (const torch::Tensor& x : xs)
        if (x.dim() != 5 || x.sizes().slice(2) != xs.front().sizes().slice(2)) return -1;
      const int64_t k = weight.size(2);
      if (k % 2 == 0 || weight.size(3) != k || weight.size(4) != k) return -1;
      const Window w = window.filled(3, weight.sizes().slice(2));
      const Padding p = resolve_padding(w, xs.front().sizes().slice(2));
      for (size_t i = 0; i < 3; ++i)
        if (w.strides[i] != 1 || w.dilations[i] != 1 || p.begin[i] != k / 2 || p.end[i] != k / 2)
          return -1;
      return k / 2;
    };
    if (const int64_t padding = same_padding(); padding >= 0)
      return graph::Tensors{models::split_conv3d_concat(xs, weight, bias, padding)};
    graph::Tensors whole{torch::cat(xs, 1)};
    whole.insert(whole.end(), in.begin() + static_cast<int64_t>(parts), in.end());
    return fn(whole);
  };
  return conv;
}

}  // namespace tandem::onnx::detail
