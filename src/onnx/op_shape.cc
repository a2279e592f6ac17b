// Operators that rearrange a tensor: Concat, Flatten, Reshape, Transpose, Squeeze, Unsqueeze,
// Gather, and Shape (whose batch entry is kBatchEntry, operator.h). On per-sample tensors axis 0 is
// the batch and must stay so: tandem feeds micro-batches of any size, so a node that moves, merges
// or fixes that axis is refused.
#include "ops.h"

namespace tandem::onnx::detail {
namespace {

// Axes from the attribute (opsets before 13) or the constant second input (13 on).
std::vector<int64_t> axes_of(const Node& n, bool as_input) {
  if (as_input) return n.has_input(1) ? n.constant_ints(1, "axes") : std::vector<int64_t>{};
  return n.get_ints("axes");
}

}  // namespace

Op make_concat(const Node& n) {
  const int64_t axis = n.get_int("axis", 0);
  bool any_batched = false;
  for (size_t i = 0; i < n.input_count(); ++i) {
    if (!n.batched(i)) continue;
    any_batched = true;
    n.refuse_batch_axis(i, axis, n.input_rank(i), "concatenation axis");
  }
  const std::string name = n.name();
  Op op;
  op.fn = [axis, any_batched, name](const graph::Tensors& in) {
    std::vector<torch::Tensor> parts;
    for (const auto& t : in)
      if (t.defined()) parts.push_back(t);
    const int64_t a = axis < 0 ? axis + parts.front().dim() : axis;
    TANDEM_CHECK(!any_batched || a != 0,
                 "ONNX node '{}' (Concat) concatenates along the batch axis", name);
    return graph::Tensors{torch::cat(parts, a)};
  };
  return op;
}

Op make_flatten(const Node& n) {
  const int64_t axis = n.get_int("axis", 1);
  const int64_t rank = n.input_rank(0);
  if (n.batched(0)) {
    const bool keeps_batch = axis == 1 || (rank > 0 && axis == 1 - rank);
    if (!keeps_batch) {
      n.refuse(
          fmt::format("axis {} would merge the batch axis with others or into them; tandem "
                      "flattens per sample only (axis 1)",
                      axis));
    }
  }
  Op op;
  op.fn = [axis](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    const int64_t a = axis < 0 ? axis + x.dim() : axis;
    int64_t rows = 1;
    for (int64_t i = 0; i < a; ++i) rows *= x.size(i);
    return graph::Tensors{
        x.reshape({rows, rows == 0 ? 0 : x.numel() / std::max<int64_t>(rows, 1)})};
  };
  return op;
}

Op make_reshape(const Node& n) {
  const std::vector<int64_t> shape = n.constant_ints(1, "shape");
  const bool allow_zero = n.get_int("allowzero", 0) != 0;
  const bool batched = n.batched(0);
  if (batched) {
    if (shape.empty()) n.refuse("it reshapes per-sample tensors into a scalar");
    const bool first_is_batch =
        shape[0] == -1 || shape[0] == kBatchEntry || (shape[0] == 0 && !allow_zero);
    for (size_t i = 1; i < shape.size(); ++i)
      if (shape[i] == kBatchEntry)
        n.refuse(
            fmt::format("its shape puts the batch size (from a Shape node) at axis {}, "
                        "which would move samples; tandem keeps the batch at axis 0",
                        i));
    if (!first_is_batch) {
      n.refuse(fmt::format(
          "its shape [{}] fixes axis 0, the batch, to {}: tandem feeds micro-batches of any "
          "size, so axis 0 must be -1 or 0 (copied). Export with a dynamic batch axis "
          "(dynamic_axes={{'input': {{0: 'batch'}}}}) and flatten with torch.flatten(x, 1)",
          fmt::join(shape, ","), shape[0]));
    }
  }
  const std::string name = n.name();
  Op op;
  op.fn = [=](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    std::vector<int64_t> target = shape;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == 0 && !allow_zero) target[i] = x.size(static_cast<int64_t>(i));
    }
    if (batched) target[0] = x.size(0);  // -1 there: the batch, whatever the micro-batch
    torch::Tensor y = x.reshape(target);
    TANDEM_CHECK(!batched || y.size(0) == x.size(0),
                 "ONNX node '{}' (Reshape) moved elements across samples", name);
    return graph::Tensors{y};
  };
  return op;
}

Op make_transpose(const Node& n) {
  std::vector<int64_t> perm = n.get_ints("perm");
  const int64_t rank = n.input_rank(0);
  if (n.batched(0)) {
    if (perm.empty() && rank != 1) {
      n.refuse(
          "it reverses the axes (no perm), which moves the batch axis; give a perm that "
          "keeps axis 0 first");
    }
    if (!perm.empty() && perm[0] != 0) {
      n.refuse(fmt::format("perm [{}] moves the batch axis; it must keep axis 0 first",
                           fmt::join(perm, ",")));
    }
  }
  Op op;
  op.fn = [perm](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    std::vector<int64_t> p = perm;
    if (p.empty())
      for (int64_t i = x.dim() - 1; i >= 0; --i) p.push_back(i);
    return graph::Tensors{x.permute(p)};
  };
  return op;
}

Op make_squeeze(const Node& n) {
  const std::vector<int64_t> axes = axes_of(n, n.opset() >= 13);
  const bool batched = n.batched(0);
  for (int64_t a : axes) n.refuse_batch_axis(0, a, n.input_rank(0), "squeezed axis");
  Op op;
  op.fn = [axes, batched](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    std::vector<int64_t> shape;
    std::vector<bool> drop(static_cast<size_t>(x.dim()), false);
    if (axes.empty()) {
      // Every axis of size 1, the batch excepted (a micro-batch may hold one sample).
      for (int64_t i = batched ? 1 : 0; i < x.dim(); ++i)
        drop[static_cast<size_t>(i)] = x.size(i) == 1;
    } else {
      for (int64_t a : axes) drop[static_cast<size_t>(a < 0 ? a + x.dim() : a)] = true;
    }
    for (int64_t i = 0; i < x.dim(); ++i)
      if (!drop[static_cast<size_t>(i)]) shape.push_back(x.size(i));
    return graph::Tensors{x.reshape(shape)};
  };
  return op;
}

Op make_unsqueeze(const Node& n) {
  const std::vector<int64_t> axes = axes_of(n, n.opset() >= 13);
  if (axes.empty()) n.refuse("it names no axes");
  const int64_t rank = n.input_rank(0);
  for (int64_t a : axes) {
    // Axes count in the output, of rank rank + len(axes).
    n.refuse_batch_axis(0, a, rank < 0 ? -1 : rank + static_cast<int64_t>(axes.size()),
                        "inserted axis");
  }
  Op op;
  op.fn = [axes](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    const int64_t out_rank = x.dim() + static_cast<int64_t>(axes.size());
    std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
    for (int64_t a : axes) inserted[static_cast<size_t>(a < 0 ? a + out_rank : a)] = true;
    std::vector<int64_t> shape;
    int64_t next = 0;
    for (int64_t i = 0; i < out_rank; ++i)
      shape.push_back(inserted[static_cast<size_t>(i)] ? 1 : x.size(next++));
    return graph::Tensors{x.reshape(shape)};
  };
  return op;
}

Op make_shape(const Node& n) {
  // A per-sample tensor's shape is known at load time but for its batch; the loader computes
  // it (shape_of_batched below) and runs no layer. Here: a static tensor's.
  const int64_t start = n.get_int("start", 0), end = n.get_int("end", INT64_MAX);
  Op op;
  op.fn = [start, end](const graph::Tensors& in) {
    const std::vector<int64_t> dims = in[0].sizes().vec();
    const auto rank = static_cast<int64_t>(dims.size());
    const auto clamp = [rank](int64_t i) {
      return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
    };
    const int64_t a = clamp(start), b = std::max(a, clamp(end));
    return graph::Tensors{
        torch::tensor(std::vector<int64_t>(dims.begin() + a, dims.begin() + b), torch::kInt64)};
  };
  return op;
}

torch::Tensor shape_of_batched(const Node& n, const Shape& s) {
  if (!s)
    n.refuse(fmt::format(
        "the shape of '{}' is not known at load time (the graph input's axes after the batch "
        "are not all fixed)",
        n.input_name(0)));
  std::vector<int64_t> dims = *s;
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] < 0)
      n.refuse(fmt::format(
          "axis {} of '{}' [{}] has no fixed size, so its shape is not known at load time; "
          "export with that axis fixed, or with torch.flatten instead of x.view(x.size(0), -1)",
          i, n.input_name(0), fmt::join(dims, ",")));
  dims[0] = kBatchEntry;
  const auto rank = static_cast<int64_t>(dims.size());
  const auto clamp = [rank](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
  };
  const int64_t a = clamp(n.get_int("start", 0)), b = std::max(a, clamp(n.get_int("end", rank)));
  return torch::tensor(std::vector<int64_t>(dims.begin() + a, dims.begin() + b), torch::kInt64);
}

Op make_gather(const Node& n) {
  const int64_t axis = n.get_int("axis", 0);
  if (n.batched(0)) n.refuse_batch_axis(0, axis, n.input_rank(0), "gathered axis");
  if (n.batched(1))
    n.refuse(
        "its indices are computed per sample (an embedding lookup); tandem gathers by "
        "indices known at load time");
  Op op;
  op.fn = [axis](const graph::Tensors& in) {
    const torch::Tensor& data = in[0];
    const int64_t a = axis < 0 ? axis + data.dim() : axis;
    torch::Tensor index = in[1].to(torch::kInt64);
    index = torch::where(index < 0, index + data.size(a), index);
    std::vector<int64_t> shape(data.sizes().begin(), data.sizes().begin() + a);
    shape.insert(shape.end(), index.sizes().begin(), index.sizes().end());
    shape.insert(shape.end(), data.sizes().begin() + a + 1, data.sizes().end());
    return graph::Tensors{data.index_select(a, index.flatten()).reshape(shape)};
  };
  return op;
}

}  // namespace tandem::onnx::detail
