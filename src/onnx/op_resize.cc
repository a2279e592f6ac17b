// Resize and Upsample, modes nearest and linear, over any axes but the batch.
//
// Both are computed axis by axis as ONNX's specification writes them: each output position x
// maps to a source coordinate (coordinate_transformation_mode), which nearest rounds
// (nearest_mode) and linear interpolates between its two neighbours, clamped to the edge.
// Gathers along an axis (index_select) keep autograd's backward exact. For the common cases
// this equals PyTorch's interpolate (nearest = asymmetric + floor; linear with align_corners
// = align_corners; linear half_pixel = align_corners=False).
#include "ops.h"
#include "slab_rules.h"

namespace tandem::onnx::detail {
namespace {

struct ResizeMode {
  bool linear = false;
  std::string coordinates = "half_pixel";
  std::string nearest = "round_prefer_floor";
};

// Source coordinate of output position x on an axis resized from `in` to `out` by `scale`.
double source(const ResizeMode& m, int64_t x, int64_t in, int64_t out, double scale) {
  const double xd = static_cast<double>(x);
  if (m.coordinates == "align_corners")
    return out == 1 ? 0.0 : xd * static_cast<double>(in - 1) / static_cast<double>(out - 1);
  if (m.coordinates == "asymmetric") return xd / scale;
  if (m.coordinates == "pytorch_half_pixel" && out == 1) return 0.0;
  return (xd + 0.5) / scale - 0.5;  // half_pixel, pytorch_half_pixel
}

int64_t round_nearest(const ResizeMode& m, double s) {
  if (m.nearest == "floor") return static_cast<int64_t>(std::floor(s));
  if (m.nearest == "ceil") return static_cast<int64_t>(std::ceil(s));
  const double f = std::floor(s);
  if (s - f == 0.5) return static_cast<int64_t>(m.nearest == "round_prefer_ceil" ? f + 1 : f);
  return static_cast<int64_t>(std::round(s));
}

// x resized along `axis` to `out` positions.
torch::Tensor resize_axis(const torch::Tensor& x, int64_t axis, int64_t out, double scale,
                          const ResizeMode& m) {
  const int64_t in = x.size(axis);
  if (in == out && scale == 1.0) return x;
  std::vector<int64_t> lo(static_cast<size_t>(out)), hi(static_cast<size_t>(out));
  std::vector<double> weight(static_cast<size_t>(out), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const double s = source(m, i, in, out, scale);
    const size_t k = static_cast<size_t>(i);
    if (!m.linear) {
      lo[k] = std::clamp<int64_t>(round_nearest(m, s), 0, in - 1);
      continue;
    }
    const double c = std::clamp(s, 0.0, static_cast<double>(in - 1));
    lo[k] = static_cast<int64_t>(std::floor(c));
    hi[k] = std::min(lo[k] + 1, in - 1);
    weight[k] = c - static_cast<double>(lo[k]);
  }
  const auto index = torch::TensorOptions().dtype(torch::kInt64);
  const torch::Tensor a = x.index_select(axis, torch::tensor(lo, index).to(x.device()));
  if (!m.linear) return a;
  const torch::Tensor b = x.index_select(axis, torch::tensor(hi, index).to(x.device()));
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[static_cast<size_t>(axis)] = out;
  const torch::Tensor w = torch::tensor(weight, torch::TensorOptions().dtype(torch::kFloat64))
                              .to(x.options())
                              .reshape(shape);
  return a + (b - a) * w;
}

ResizeMode read_mode(const Node& n, bool upsample) {
  ResizeMode m;
  const std::string mode = n.get_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "bilinear" && mode != "trilinear")
    n.refuse(
        fmt::format("mode '{}' is not supported; tandem resizes with nearest and linear", mode));
  m.linear = mode != "nearest";
  if (upsample) {
    m.coordinates = "asymmetric";  // Upsample's definition
    m.nearest = "floor";
    return m;
  }
  m.coordinates = n.get_string("coordinate_transformation_mode", "half_pixel");
  m.nearest = n.get_string("nearest_mode", "round_prefer_floor");
  if (m.coordinates != "half_pixel" && m.coordinates != "pytorch_half_pixel" &&
      m.coordinates != "align_corners" && m.coordinates != "asymmetric") {
    n.refuse(
        fmt::format("coordinate_transformation_mode '{}' is not supported; tandem supports "
                    "half_pixel, pytorch_half_pixel, align_corners and asymmetric",
                    m.coordinates));
  }
  if (m.nearest != "round_prefer_floor" && m.nearest != "round_prefer_ceil" &&
      m.nearest != "floor" && m.nearest != "ceil")
    n.refuse(fmt::format("nearest_mode '{}' is unknown", m.nearest));
  return m;
}

// Scales (per axis, floats) or sizes (per axis, integers); at most one is given.
Op resize(const Node& n, std::vector<double> scales, std::vector<int64_t> sizes, ResizeMode m) {
  if (!scales.empty() && scales[0] != 1.0)
    n.refuse(fmt::format("it scales the batch axis by {}", scales[0]));
  const std::string name = n.name();
  Op op;
  op.fn = [=](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    const size_t rank = static_cast<size_t>(x.dim());
    TANDEM_CHECK(scales.empty() ? sizes.size() == rank : scales.size() == rank,
                 "ONNX node '{}' resizes {} axes of a tensor of rank {}", name,
                 scales.empty() ? sizes.size() : scales.size(), rank);
    torch::Tensor y = x;
    // Axis 0 is the batch (sizes[0], fixed when the graph was exported, is not used).
    for (size_t a = 1; a < rank; ++a) {
      const int64_t in_size = x.size(static_cast<int64_t>(a));
      const int64_t out =
          scales.empty()
              ? sizes[a]
              : static_cast<int64_t>(std::floor(static_cast<double>(in_size) * scales[a]));
      const double scale =
          scales.empty() ? static_cast<double>(out) / static_cast<double>(in_size) : scales[a];
      y = resize_axis(y, static_cast<int64_t>(a), out, scale, m);
    }
    return graph::Tensors{y};
  };
  return op;
}

std::vector<double> float_values(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kFloat64).contiguous().flatten();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Whether nearest resizing by the whole factor `scale` keeps to blocks: output plane i reads
// input plane i / scale, whatever the extent, so that a slab's output planes read the slab's
// own input planes at any offset that is a multiple of the factor.
bool blockwise_nearest(const ResizeMode& m, int64_t scale) {
  for (int64_t whole : {4, 6}) {
    const int64_t out = whole * scale;
    for (int64_t i = 0; i < out; ++i) {
      const int64_t src = std::clamp<int64_t>(
          round_nearest(m, source(m, i, whole, out, static_cast<double>(scale))), 0, whole - 1);
      if (src != i / scale) return false;
    }
  }
  return true;
}

SlabStep slab_resize_by(const ResizeMode& m, const std::vector<double>& scales) {
  SlabStep step;
  if (scales.size() <= 2 || scales[2] == 1.0) return step;
  const double s = scales[2];
  if (m.linear) {
    step.refused =
        "it interpolates linearly along the depth axis, which would need planes of "
        "the neighbouring slabs";
  } else if (s < 1 || s != std::floor(s)) {
    step.refused = fmt::format(
        "it scales the depth by {}; on slabs only whole up-sampling "
        "factors are supported",
        s);
  } else if (!blockwise_nearest(m, static_cast<int64_t>(s))) {
    step.refused = fmt::format(
        "with coordinate_transformation_mode '{}' and nearest_mode '{}' "
        "its output planes do not read whole blocks of input planes",
        m.coordinates, m.nearest);
  } else {
    step.up = static_cast<int64_t>(s);
  }
  return step;
}

}  // namespace

SlabStep slab_resize(const Node& n, int64_t axis) {
  if (axis != 2) return slab_layout(n, axis);
  const ResizeMode m = read_mode(n, false);
  if (n.has_input(2) && n.constant(2, "scales").numel() > 0)
    return slab_resize_by(m, float_values(n.constant(2, "scales")));
  SlabStep step;
  step.refused =
      "it gives output sizes, which are the whole volume's and not a slab's; export "
      "it with scales";
  return step;
}

SlabStep slab_upsample(const Node& n, int64_t axis) {
  if (axis != 2) return slab_layout(n, axis);
  const ResizeMode m = read_mode(n, true);
  if (n.has_input(1)) return slab_resize_by(m, float_values(n.constant(1, "scales")));
  const std::vector<float> attr = n.get_floats("scales");
  return slab_resize_by(m, std::vector<double>(attr.begin(), attr.end()));
}

Op make_resize(const Node& n) {
  const ResizeMode m = read_mode(n, false);
  if (n.has_input(2) && n.constant(2, "scales").numel() > 0) {
    if (n.has_input(3) && n.constant(3, "sizes").numel() > 0)
      n.refuse("it gives both scales and sizes; ONNX allows one");
    return resize(n, float_values(n.constant(2, "scales")), {}, m);
  }
  if (!n.has_input(3)) n.refuse("it gives neither scales nor sizes");
  std::vector<int64_t> sizes = n.constant_ints(3, "sizes");
  return resize(n, {}, sizes, m);
}

Op make_upsample(const Node& n) {
  const ResizeMode m = read_mode(n, true);
  if (n.has_input(1)) return resize(n, float_values(n.constant(1, "scales")), {}, m);
  const std::vector<float> attr = n.get_floats("scales");
  if (attr.empty()) n.refuse("it gives no scales");
  return resize(n, std::vector<double>(attr.begin(), attr.end()), {}, m);
}

}  // namespace tandem::onnx::detail
