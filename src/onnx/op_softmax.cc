// Softmax and LogSoftmax. Opsets 11 and 12 flatten the input into 2-D at `axis` (default 1)
// and normalize each row; from opset 13 they normalize along `axis` (default -1) alone.
#include "ops.h"

namespace tandem::onnx::detail {
namespace {

Op softmax(const Node& n, bool log) {
  const bool coerce = n.opset() < 13;
  const int64_t axis = n.get_int("axis", coerce ? 1 : -1);
  n.refuse_batch_axis(0, axis, n.input_rank(0), "axis");
  const std::string name = n.name();
  Op op;
  op.fn = [=](const graph::Tensors& in) {
    const torch::Tensor& x = in[0];
    const int64_t a = axis < 0 ? axis + x.dim() : axis;
    TANDEM_CHECK(a >= 1 && a < x.dim(),
                 "ONNX node '{}': softmax axis {} of a tensor of shape [{}] is the batch axis or "
                 "out of range",
                 name, axis, fmt::join(x.sizes(), ","));
    auto f = [log](const torch::Tensor& t, int64_t dim) {
      return log ? torch::log_softmax(t, dim) : torch::softmax(t, dim);
    };
    if (!coerce || a == x.dim() - 1) return graph::Tensors{f(x, a)};
    // Rows of the 2-D coercion: axes [0, a) (the batch among them) times axes [a, rank).
    std::vector<int64_t> flat{1, 1};
    for (int64_t i = 0; i < a; ++i) flat[0] *= x.size(i);
    for (int64_t i = a; i < x.dim(); ++i) flat[1] *= x.size(i);
    return graph::Tensors{f(x.reshape(flat), 1).reshape(x.sizes())};
  };
  return op;
}

}  // namespace

Op make_softmax(const Node& n) { return softmax(n, false); }
Op make_log_softmax(const Node& n) { return softmax(n, true); }

}  // namespace tandem::onnx::detail
