// Gemm and MatMul: the dense layers. Shapes: A [B,K] (per sample) times a weight [K,N] (or
// [N,K] with transB, as PyTorch's Linear stores it) plus a bias [N]; MatMul broadcasts over
// leading axes as numpy does.
#include "ops.h"

namespace tandem::onnx::detail {
namespace {

// K x N of a known 2-D weight shape, or 0.
double weight_elements(const Shape& s) {
  if (!s || s->size() != 2 || (*s)[0] < 0 || (*s)[1] < 0) return 0;
  return static_cast<double>((*s)[0]) * static_cast<double>((*s)[1]);
}

}  // namespace

Op make_gemm(const Node& n) {
  const float alpha = n.get_float("alpha", 1.0f), beta = n.get_float("beta", 1.0f);
  const bool trans_a = n.get_int("transA", 0) != 0, trans_b = n.get_int("transB", 0) != 0;
  if (n.batched(1)) {
    n.refuse(
        "its second operand B is computed per sample; tandem keeps the batch in axis 0 of A, "
        "with B the weight");
  }
  if (trans_a && n.batched(0)) {
    n.refuse("transA=1 would move the batch (axis 0 of A) into the columns; export the "
             "operand with the batch first");
  }
  Op op;
  op.flops_per_sample = 2.0 * weight_elements(n.input_shape(1));
  op.fn = [=](const graph::Tensors& in) {
    const torch::Tensor a = trans_a ? in[0].t() : in[0];
    const torch::Tensor& c = in.size() > 2 ? in[2] : torch::Tensor();
    if (trans_b && alpha == 1.0f && (beta == 1.0f || !c.defined())) {
      return graph::Tensors{torch::linear(a, in[1], c)};  // what PyTorch's Linear computes
    }
    torch::Tensor y = a.matmul(trans_b ? in[1].t() : in[1]);
    if (alpha != 1.0f) y = y * alpha;
    if (c.defined()) y = y + (beta == 1.0f ? c : c * beta);
    return graph::Tensors{y};
  };
  return op;
}

Op make_matmul(const Node& n) {
  Op op;
  const Shape& b = n.input_shape(1);
  if (n.batched(0) && !n.batched(1) && b && b->size() == 2 && (*b)[0] > 0)
    op.flops_per_sample = 2.0 * static_cast<double>((*b)[0]) * per_sample_elements(n.output_shape(0));
  op.fn = [](const graph::Tensors& in) { return graph::Tensors{torch::matmul(in[0], in[1])}; };
  return op;
}

}  // namespace tandem::onnx::detail
