#include "slab_rules.h"

#include <numeric>

#include "tandem/common/check.h"
#include "window.h"

namespace tandem::onnx::detail {
namespace {

constexpr int64_t kAxis = 2;  // the depth of the graph input [B,C,D,...], which slabs cut

SlabStep refused(std::string why) {
  SlabStep s;
  s.refused = std::move(why);
  return s;
}

// The first per-sample input's rank, or -1 when shape inference does not know it.
int64_t batched_rank(const Node& n) {
  for (size_t i = 0; i < n.input_count(); ++i)
    if (n.has_input(i) && n.batched(i)) return n.input_rank(i);
  return -1;
}

// The sizes of a static input i, where known.
Shape static_shape(const Node& n, size_t i) {
  if (n.is_constant(i)) return n.constant(i, "operand").sizes().vec();
  return n.input_shape(i);
}

// The window along the depth (spatial axis 0) of a Conv, ConvTranspose or pooling node; the
// kernel from the attribute or else from the weight (input 1).
struct DepthWindow {
  int64_t kernel = 0, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0;
  std::string auto_pad;
  size_t dims = 0;
};

std::optional<DepthWindow> depth_window(const Node& n, bool weight_kernel) {
  const Window w = read_window(n);
  DepthWindow d;
  d.auto_pad = w.auto_pad;
  if (!w.kernel.empty()) {
    d.dims = w.kernel.size();
    d.kernel = w.kernel[0];
  } else if (weight_kernel && n.input_shape(1) && n.input_shape(1)->size() >= 3 &&
             (*n.input_shape(1))[2] > 0) {
    d.dims = n.input_shape(1)->size() - 2;
    d.kernel = (*n.input_shape(1))[2];
  } else {
    return std::nullopt;
  }
  if (!w.strides.empty()) d.stride = w.strides[0];
  if (!w.dilations.empty()) d.dilation = w.dilations[0];
  if (w.pads.size() == 2 * d.dims) {
    d.pad_begin = w.pads[0];
    d.pad_end = w.pads[d.dims];
  }
  return d;
}

// A window that keeps to blocks of `stride` planes: kernel = stride, no dilation or padding.
bool blockwise(const DepthWindow& d) {
  return d.kernel == d.stride && (d.dilation == 1 || d.kernel == 1) &&
         (d.auto_pad == "VALID" || (d.auto_pad == "NOTSET" && d.pad_begin == 0 && d.pad_end == 0));
}

std::string describe(const DepthWindow& d) {
  return fmt::format("kernel {}, stride {}, dilation {}, pads {} and {}{}", d.kernel, d.stride,
                     d.dilation, d.pad_begin, d.pad_end,
                     d.auto_pad == "NOTSET" ? "" : ", auto_pad " + d.auto_pad);
}

int64_t axis_of(const Node& n, int64_t axis, int64_t rank) {
  return axis < 0 && rank > 0 ? axis + rank : axis;
}

}  // namespace

std::string depth_not_on_axis_2(int64_t axis) {
  if (axis == kAxis) return "";
  return fmt::format(
      "its input holds the depth on axis {} (a Transpose or Reshape before it moved it), but "
      "on slabs this operator needs its input as [B,C,D,...], the depth on axis 2",
      axis);
}

SlabStep slab_local(const Node&, int64_t) { return {}; }

SlabStep slab_layout(const Node&, int64_t axis) { return refused(depth_not_on_axis_2(axis)); }

SlabStep slab_broadcast(const Node& n, int64_t axis) {
  const int64_t rank = batched_rank(n);
  for (size_t i = 0; i < n.input_count(); ++i) {
    if (!n.has_input(i) || n.batched(i)) continue;
    const Shape s = static_shape(n, i);
    if (!s)
      return refused(fmt::format("the shape of its operand '{}' is unknown", n.input_name(i)));
    // Numpy broadcasting aligns the operand's last axis with the tensor's last.
    const int64_t at = axis - (rank - static_cast<int64_t>(s->size()));
    if (rank < 0 && !s->empty()) return refused("the rank of its per-sample input is unknown");
    if (at >= 0 && at < static_cast<int64_t>(s->size()) && (*s)[static_cast<size_t>(at)] != 1)
      return refused(
          fmt::format("its operand '{}' [{}] varies along the depth axis, which a slab "
                      "holds only part of",
                      n.input_name(i), fmt::join(*s, ",")));
  }
  return {};
}

SlabStep slab_conv(const Node& n, int64_t axis) {
  if (axis != kAxis) return refused(depth_not_on_axis_2(axis));
  const auto d = depth_window(n, true);
  if (!d) return refused("its kernel shape is unknown");
  const int64_t reach = (d->kernel - 1) * d->dilation + 1;
  if (d->stride == 1) {
    int64_t begin = d->pad_begin, end = d->pad_end;
    if (d->auto_pad == "VALID") begin = end = 0;
    if (d->auto_pad == "SAME_UPPER" || d->auto_pad == "SAME_LOWER") {
      end = (reach - 1) / 2 + (d->auto_pad == "SAME_UPPER" ? (reach - 1) % 2 : 0);
      begin = reach - 1 - end;
    }
    if (begin == end && 2 * begin == reach - 1) {
      SlabStep s;
      s.halo = begin;
      return s;
    }
    return refused(fmt::format(
        "along the depth its window has {}: on slabs a stride-1 convolution needs \"same\" "
        "padding ((reach - 1) / 2 planes on each side, filled from the neighbouring slabs)",
        describe(*d)));
  }
  if (blockwise(*d)) {
    SlabStep s;
    s.down = d->stride;
    return s;
  }
  return refused(
      fmt::format("along the depth its window has {}: on slabs a strided convolution "
                  "needs kernel = stride and no padding",
                  describe(*d)));
}

SlabStep slab_conv_transpose(const Node& n, int64_t axis) {
  if (axis != kAxis) return refused(depth_not_on_axis_2(axis));
  const auto d = depth_window(n, true);
  if (!d) return refused("its kernel shape is unknown");
  const std::vector<int64_t> output_padding = n.get_ints("output_padding");
  const bool padded = !output_padding.empty() && output_padding[0] != 0;
  if (!n.get_ints("output_shape").empty())
    return refused("it sets output_shape, the whole volume's size, which a slab's output is not");
  if (blockwise(*d) && !padded) {
    SlabStep s;
    s.up = d->stride;
    return s;
  }
  return refused(
      fmt::format("along the depth its window has {}{}: on slabs a transposed "
                  "convolution needs kernel = stride and no padding",
                  describe(*d), padded ? " and output_padding" : ""));
}

SlabStep slab_pool(const Node& n, int64_t axis) {
  if (axis != kAxis) return refused(depth_not_on_axis_2(axis));
  const auto d = depth_window(n, false);
  if (!d) return refused("it has no kernel_shape");
  if (blockwise(*d)) {
    SlabStep s;
    s.down = d->stride;
    return s;
  }
  return refused(
      fmt::format("along the depth its window has {}: on slabs a pooling needs "
                  "kernel = stride and no padding",
                  describe(*d)));
}

SlabStep slab_concat(const Node& n, int64_t depth) {
  const int64_t rank = batched_rank(n);
  const int64_t axis = axis_of(n, n.get_int("axis", 0), rank);
  if (axis < 0) return refused("the rank of its inputs is unknown");
  if (axis == depth) return refused("it concatenates along the depth axis, which slabs cut");
  for (size_t i = 0; i < n.input_count(); ++i)
    if (n.has_input(i) && !n.batched(i))
      return refused(fmt::format("its operand '{}' is not per sample: it spans the whole depth",
                                 n.input_name(i)));
  return {};
}

SlabStep slab_softmax(const Node& n, int64_t depth) {
  const bool coerce = n.opset() < 13;
  const int64_t rank = batched_rank(n);
  const int64_t axis = axis_of(n, n.get_int("axis", coerce ? 1 : -1), rank);
  if (axis < 0) return refused("the rank of its input is unknown");
  // Opsets 11 and 12 normalize over `axis` and every axis after it.
  if (axis == depth || (coerce && axis < depth))
    return refused("it normalizes over the depth axis, which slabs cut");
  return {};
}

SlabStep slab_pad(const Node& n, int64_t axis) {
  const std::vector<int64_t> pads = n.constant_ints(1, "pads");
  const size_t rank = pads.size() / 2;
  const auto at = static_cast<size_t>(axis);
  if (rank > at && (pads[at] != 0 || pads[rank + at] != 0))
    return refused(fmt::format("pads [{}] pad the depth axis, whose ends a slab may not hold",
                               fmt::join(pads, ",")));
  return {};
}

SlabStep slab_transpose(const Node& n, int64_t axis) {
  const std::vector<int64_t> perm = n.get_ints("perm");
  const auto to = std::find(perm.begin(), perm.end(), axis);
  if (to == perm.end()) return refused("it has no perm (it reverses the axes, the batch's too)");
  SlabStep s;
  s.axis = to - perm.begin();
  return s;
}

// A Reshape keeps the planes whole when the axes up to the depth stay as they are (0: copied,
// or the same size) and the depth is copied (0), or is the one axis it infers (-1) while the
// axes after it hold what the input's do: a slab's planes then stay planes, whatever the
// slab's size. It moves no plane across slabs; flattening the depth into another axis does.
SlabStep slab_reshape(const Node& n, int64_t axis) {
  const std::vector<int64_t> shape = n.constant_ints(1, "shape");
  const Shape in = n.input_shape(0);
  const bool allow_zero = n.get_int("allowzero", 0) != 0;
  const auto at = static_cast<size_t>(axis);
  const auto mixes = [&] {
    return refused(fmt::format(
        "its shape [{}] merges the depth (axis {} of [{}]) with other axes or splits it: "
        "on slabs a Reshape must keep the axes up to the depth as they are and the depth's "
        "planes whole (0 or -1 there)",
        fmt::join(shape, ","), axis, in ? fmt::format("{}", fmt::join(*in, ",")) : "?"));
  };
  if (!in || shape.size() <= at || allow_zero) return mixes();
  const auto copied = [&](size_t i) {
    return shape[i] == 0 || (i > 0 && i < in->size() && (*in)[i] >= 0 && shape[i] == (*in)[i]);
  };
  for (size_t i = 1; i < at; ++i)
    if (!copied(i)) return mixes();
  if (shape[at] == 0) return {};
  if (shape[at] != -1) return mixes();
  // The depth inferred: the axes after it must hold exactly what the input's after it hold.
  int64_t after_in = 1, after_out = 1;
  for (size_t i = at + 1; i < in->size(); ++i) {
    if ((*in)[i] < 0) return mixes();
    after_in *= (*in)[i];
  }
  for (size_t i = at + 1; i < shape.size(); ++i) {
    const int64_t d = shape[i] == 0 && i < in->size() ? (*in)[i] : shape[i];
    if (d <= 0) return mixes();
    after_out *= d;
  }
  if (after_in != after_out) return mixes();
  return {};
}

SlabStep slab_gather(const Node& n, int64_t depth) {
  const int64_t axis = axis_of(n, n.get_int("axis", 0), batched_rank(n));
  if (axis < 0) return refused("the rank of its input is unknown");
  if (axis == depth) return refused("it gathers along the depth axis, which slabs cut");
  if (axis > depth) return {};
  // The indices' axes replace the gathered one, before the depth.
  const Shape indices = static_shape(n, 1);
  if (!indices) return refused("the rank of its indices is unknown");
  SlabStep s;
  s.axis = depth + static_cast<int64_t>(indices->size()) - 1;
  return s;
}

SlabStep slab_reduce(const Node& n, int64_t depth) {
  const int64_t rank = batched_rank(n);
  if (rank < 0) return refused("the rank of its input is unknown");
  int64_t before = 0;
  for (int64_t a : n.get_ints("axes")) {
    a = axis_of(n, a, rank);
    if (a == depth) return refused("it averages over the depth axis, which slabs cut");
    before += a < depth ? 1 : 0;
  }
  SlabStep s;
  if (n.get_int("keepdims", 1) == 0) s.axis = depth - before;
  return s;
}

SlabStep slab_layer_norm(const Node& n, int64_t depth) {
  const int64_t axis = axis_of(n, n.get_int("axis", -1), batched_rank(n));
  if (axis < 0) return refused("the rank of its input is unknown");
  if (axis <= depth)
    return refused(fmt::format(
        "it normalizes over axes {} and after, which hold the depth (axis {}) that slabs cut", axis,
        depth));
  return {};
}

SlabStep slab_batch_norm(const Node&, int64_t) {
  return refused(
      "its statistics run over the batch and the whole volume; on slabs use "
      "InstanceNormalization, whose statistics tandem sums over the slabs");
}

SlabStep slab_global_pool(const Node&, int64_t) {
  return refused(
      "it averages the whole volume into one value per channel; a spatial split needs a "
      "graph that keeps the depth axis to its output (segmentation, a volume out)");
}

SlabWalk::SlabWalk(const std::string& input, int64_t input_rank) {
  ratio_[input] = Ratio{};
  if (input_rank == 0) {
    refused_ = fmt::format("the rank of the graph input '{}' is unknown", input);
  } else if (input_rank <= kAxis) {
    refused_ = fmt::format(
        "the graph input '{}' has rank {}: no volume to cut (a spatial split cuts axis 2 "
        "of [B,C,D,...])",
        input, input_rank);
  }
}

void SlabWalk::add(const Node& node) {
  if (!refused_.empty()) return;
  const auto refuse = [&](const std::string& why) {
    refused_ =
        fmt::format("ONNX node '{}' ({}) cannot run on slabs: {}", node.name(), node.op(), why);
  };
  std::optional<Ratio> in;
  for (size_t i = 0; i < node.input_count(); ++i) {
    if (!node.has_input(i) || !node.batched(i)) continue;
    const auto it = ratio_.find(node.input_name(i));
    TANDEM_ASSERT(it != ratio_.end(), "per-sample tensor '{}' before its producer",
                  node.input_name(i));
    if (in && (in->num != it->second.num || in->den != it->second.den))
      return refuse("its inputs hold the depth at different resolutions");
    if (in && in->axis != it->second.axis)
      return refuse(fmt::format("its inputs hold the depth on different axes ({} and {})", in->axis,
                                it->second.axis));
    in = it->second;
  }
  TANDEM_ASSERT(in, "node '{}' reads no per-sample tensor", node.name());
  const OperatorEntry* entry = find_operator(node.op());
  if (!entry || !entry->slab)
    return refuse(
        "it reshapes or mixes the depth axis, which slabs cut; a spatial split runs graphs "
        "of convolutions, poolings, up-samplings, normalizations per instance, "
        "element-wise operators and concatenations of channels");
  const SlabStep step = entry->slab(node, in->axis);
  if (!step.refused.empty()) return refuse(step.refused);
  Ratio r = *in;
  // The slab's planes at this resolution, slab x num / den, must divide by `down`: the slab's
  // planes must be a multiple of den x down / gcd(num, den x down).
  if (step.down > 1) {
    const int64_t den = r.den * step.down;
    multiple_ = std::lcm(multiple_, den / std::gcd(r.num, den));
    r.den = den;
  }
  r.num *= step.up;
  const int64_t g = std::gcd(r.num, r.den);
  r.num /= g;
  r.den /= g;
  if (step.axis >= 0) r.axis = step.axis;
  // A halo of h planes at the input's resolution (num / den) needs slabs of h x den / num.
  if (step.halo > 0) least_ = std::max(least_, (step.halo * in->den + in->num - 1) / in->num);
  for (size_t k = 0; k < node.output_count(); ++k) ratio_[node.output_name(k)] = r;
}

void SlabWalk::finish(const std::string& output, graph::Model& model) const {
  std::string why = refused_;
  if (why.empty()) {
    const auto it = ratio_.find(output);
    TANDEM_ASSERT(it != ratio_.end(), "graph output '{}' is not per sample", output);
    if (it->second.axis != kAxis)
      why = fmt::format(
          "the graph output '{}' holds the depth on axis {}, where the target's is on axis 2; "
          "transpose it back to [B,C,D,...]",
          output, it->second.axis);
    else if (it->second.num != 1 || it->second.den != 1)
      why = fmt::format(
          "the graph output '{}' holds {}/{} of the input's planes, so its slabs would "
          "not match the target's",
          output, it->second.num, it->second.den);
  }
  model.slab_refusal = why;
  model.slab_dim = why.empty() ? static_cast<int>(kAxis) : -1;
  // Slabs hold a multiple of multiple_ planes, and at least least_: the smallest multiple of
  // multiple_ that is not below least_ covers both.
  model.slab_multiple = why.empty() ? (least_ + multiple_ - 1) / multiple_ * multiple_ : 1;
}

}  // namespace tandem::onnx::detail
