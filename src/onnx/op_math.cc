// Operators of the blocks PyTorch and Keras models are made of beyond convolutions: Clip
// (ReLU6), PRelu (a trained slope), ReduceMean (a layer norm as PyTorch exports it before
// opset 17), LayerNormalization (opset 17), and Cast (PyTorch casts ReLU6's bounds).
// Shapes: x [B,...]; PRelu's slope broadcasts to x ([C,1,1] for [B,C,H,W]).
#include "ops.h"

namespace tandem::onnx::detail {
namespace {

// The axes of a reduction, from the attribute (opsets before 18, as tandem reads them).
std::vector<int64_t> reduced_axes(const Node& n) { return n.get_ints("axes"); }

}  // namespace

Op make_cast(const Node& n) {
  const torch::ScalarType type =
      scalar_type(static_cast<int>(n.get_int("to", 0)),
                  fmt::format("ONNX node '{}' (Cast): its 'to'", n.name()));
  Op op;
  op.fn = [type](const graph::Tensors& in) { return graph::Tensors{in[0].to(type)}; };
  return op;
}

Op make_clip(const Node& n) {
  // Opset 11 on: min and max are optional inputs; constants (ReLU6's 0 and 6) clamp by scalars,
  // as torch.clamp and nn.ReLU6 do, with the same gradient at the bounds.
  std::optional<double> low, high;
  bool constant = true;
  for (size_t i : {1u, 2u}) {
    if (!n.has_input(i)) continue;
    if (n.batched(i) || !n.is_constant(i)) {
      constant = false;
      continue;
    }
    const torch::Tensor& t = n.constant(i, i == 1 ? "min" : "max");
    if (t.numel() != 1) n.refuse(fmt::format("its {} is not a scalar", i == 1 ? "min" : "max"));
    (i == 1 ? low : high) = t.to(torch::kFloat64).item<double>();
  }
  Op op;
  if (constant) {
    op.fn = [low, high](const graph::Tensors& in) {
      const c10::optional<c10::Scalar> lo = low ? c10::optional<c10::Scalar>(*low) : c10::nullopt;
      const c10::optional<c10::Scalar> hi = high ? c10::optional<c10::Scalar>(*high) : c10::nullopt;
      return graph::Tensors{torch::clamp(in[0], lo, hi)};
    };
    return op;
  }
  op.fn = [](const graph::Tensors& in) {
    const auto bound = [&](size_t i) {
      return in.size() > i && in[i].defined()
                 ? c10::optional<torch::Tensor>(in[i].to(in[0].dtype()))
                 : c10::nullopt;
    };
    return graph::Tensors{torch::clamp(in[0], bound(1), bound(2))};
  };
  return op;
}

Op make_prelu(const Node&) {
  // x where x > 0, else slope x: PyTorch's prelu, whose gradient at 0 takes the slope's side.
  Op op;
  op.fn = [](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    return graph::Tensors{torch::where(x > 0, x, x * in[1])};
  };
  return op;
}

Op make_reduce_mean(const Node& n) {
  const std::vector<int64_t> axes = reduced_axes(n);
  const bool keep = n.get_int("keepdims", 1) != 0;
  if (n.batched(0)) {
    if (axes.empty())
      n.refuse("it reduces every axis, the batch's too (no axes); give the axes after the batch");
    for (int64_t a : axes) n.refuse_batch_axis(0, a, n.input_rank(0), "reduced axis");
  }
  Op op;
  op.fn = [axes, keep](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    if (axes.empty())
      return graph::Tensors{
          keep ? x.mean().reshape(std::vector<int64_t>(static_cast<size_t>(x.dim()), 1))
               : x.mean()};
    return graph::Tensors{x.mean(axes, keep)};
  };
  return op;
}

Op make_layer_normalization(const Node& n) {
  const int64_t axis = n.get_int("axis", -1);
  const double epsilon = n.get_float("epsilon", 1e-5f);
  if (n.batched(0)) n.refuse_batch_axis(0, axis, n.input_rank(0), "first normalized axis");
  Op op;
  op.outputs = 1;  // Mean and InvStdDev are not computed
  op.fn = [axis, epsilon](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    const int64_t a = axis < 0 ? axis + x.dim() : axis;
    const std::vector<int64_t> normalized(x.sizes().begin() + a, x.sizes().end());
    const torch::Tensor bias = in.size() > 2 ? in[2] : torch::Tensor();
    // torch.layer_norm wants the scale and bias of the normalized shape; ONNX lets them
    // broadcast to it.
    const auto full = [&](const torch::Tensor& t) {
      return t.defined() ? t.expand(normalized).contiguous() : t;
    };
    return graph::Tensors{torch::layer_norm(x, normalized, full(in[1]), full(bias), epsilon)};
  };
  return op;
}

}  // namespace tandem::onnx::detail
