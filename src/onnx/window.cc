#include "window.h"

#include "tandem/common/check.h"

namespace tandem::onnx::detail {
namespace {

std::vector<int64_t> or_fill(const std::vector<int64_t>& v, size_t n, int64_t value) {
  return v.empty() ? std::vector<int64_t>(n, value) : v;
}

}  // namespace

Window Window::filled(size_t dims, c10::IntArrayRef weight_kernel) const {
  Window w = *this;
  if (w.kernel.empty()) w.kernel = weight_kernel.vec();
  w.strides = or_fill(strides, dims, 1);
  w.dilations = or_fill(dilations, dims, 1);
  w.pads = or_fill(pads, 2 * dims, 0);
  TANDEM_CHECK(w.kernel.size() == dims && w.strides.size() == dims && w.dilations.size() == dims &&
                   w.pads.size() == 2 * dims,
               "a window over {} spatial axes has kernel [{}], strides [{}], dilations [{}] and "
               "pads [{}]: the lengths do not match the input's axes",
               dims, fmt::join(w.kernel, ","), fmt::join(w.strides, ","),
               fmt::join(w.dilations, ","), fmt::join(w.pads, ","));
  return w;
}

Window read_window(const Node& node) {
  Window w;
  w.kernel = node.get_ints("kernel_shape");
  w.strides = node.get_ints("strides");
  w.dilations = node.get_ints("dilations");
  w.pads = node.get_ints("pads");
  w.auto_pad = node.get_string("auto_pad", "NOTSET");
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" &&
      w.auto_pad != "VALID") {
    node.refuse(fmt::format("auto_pad '{}' is unknown; ONNX defines NOTSET, SAME_UPPER, "
                            "SAME_LOWER and VALID",
                            w.auto_pad));
  }
  if (!w.pads.empty() && w.pads.size() % 2 != 0)
    node.refuse(fmt::format("pads [{}] must hold a begin and an end per axis",
                            fmt::join(w.pads, ",")));
  for (int64_t s : w.strides)
    if (s < 1) node.refuse(fmt::format("strides [{}] must be positive", fmt::join(w.strides, ",")));
  return w;
}

Padding resolve_padding(const Window& w, c10::IntArrayRef spatial) {
  const size_t dims = spatial.size();
  Padding p;
  p.begin.assign(w.pads.begin(), w.pads.begin() + static_cast<int64_t>(dims));
  p.end.assign(w.pads.begin() + static_cast<int64_t>(dims), w.pads.end());
  if (w.auto_pad == "NOTSET") return p;
  for (size_t i = 0; i < dims; ++i) {
    int64_t total = 0;
    if (w.auto_pad != "VALID") {
      const int64_t out = (spatial[i] + w.strides[i] - 1) / w.strides[i];
      const int64_t reach = (w.kernel[i] - 1) * w.dilations[i] + 1;
      total = std::max<int64_t>((out - 1) * w.strides[i] + reach - spatial[i], 0);
    }
    const int64_t small = total / 2;
    p.begin[i] = w.auto_pad == "SAME_UPPER" ? small : total - small;
    p.end[i] = total - p.begin[i];
  }
  return p;
}

torch::Tensor pad_spatial(const torch::Tensor& x, const Padding& p, double value) {
  // constant_pad_nd takes (begin, end) pairs from the last axis backwards.
  std::vector<int64_t> pairs;
  for (size_t i = p.begin.size(); i-- > 0;) {
    pairs.push_back(p.begin[i]);
    pairs.push_back(p.end[i]);
  }
  return torch::constant_pad_nd(x, pairs, value);
}

void check_spatial(const std::string& node, const char* op, const torch::Tensor& x) {
  TANDEM_CHECK(x.dim() >= 3 && x.dim() <= 5,
               "ONNX node '{}' ({}) takes [B,C] and 1 to 3 spatial axes, not a tensor of shape [{}]",
               node, op, fmt::join(x.sizes(), ","));
}

}  // namespace tandem::onnx::detail
