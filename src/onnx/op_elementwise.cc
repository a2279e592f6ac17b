// Element-wise operators: Add, Sub, Mul, Div, Pow (with numpy broadcasting, as ONNX defines
// it), Relu, LeakyRelu, Sigmoid, Tanh, Erf (GELU), Sqrt and Identity.
#include "ops.h"

namespace tandem::onnx::detail {
namespace {

Op unary(torch::Tensor (*f)(const torch::Tensor&)) {
  Op op;
  op.fn = [f](const graph::Tensors& in) { return graph::Tensors{f(in[0])}; };
  return op;
}

torch::Tensor relu_of(const torch::Tensor& x) { return torch::relu(x); }
torch::Tensor sigmoid_of(const torch::Tensor& x) { return torch::sigmoid(x); }
torch::Tensor tanh_of(const torch::Tensor& x) { return torch::tanh(x); }
torch::Tensor erf_of(const torch::Tensor& x) { return torch::erf(x); }
torch::Tensor sqrt_of(const torch::Tensor& x) { return torch::sqrt(x); }
torch::Tensor same(const torch::Tensor& x) { return x; }

}  // namespace

Op make_add(const Node&) {
  Op op;
  op.fn = [](const graph::Tensors& in) { return graph::Tensors{in[0] + in[1]}; };
  return op;
}

Op make_sub(const Node&) {
  Op op;
  op.fn = [](const graph::Tensors& in) { return graph::Tensors{in[0] - in[1]}; };
  return op;
}

Op make_mul(const Node&) {
  Op op;
  op.fn = [](const graph::Tensors& in) { return graph::Tensors{in[0] * in[1]}; };
  return op;
}

Op make_div(const Node&) {
  Op op;
  // Integer division truncates in ONNX (shape arithmetic); floats divide.
  op.fn = [](const graph::Tensors& in) {
    const bool integral = !in[0].is_floating_point() && !in[1].is_floating_point();
    return graph::Tensors{integral ? torch::div(in[0], in[1], "trunc") : in[0] / in[1]};
  };
  return op;
}

Op make_pow(const Node&) {
  Op op;
  op.fn = [](const graph::Tensors& in) { return graph::Tensors{torch::pow(in[0], in[1])}; };
  return op;
}

Op make_relu(const Node&) { return unary(relu_of); }
Op make_erf(const Node&) { return unary(erf_of); }
Op make_sqrt(const Node&) { return unary(sqrt_of); }
Op make_sigmoid(const Node&) { return unary(sigmoid_of); }
Op make_tanh(const Node&) { return unary(tanh_of); }
Op make_identity(const Node&) { return unary(same); }

Op make_leaky_relu(const Node& n) {
  const double alpha = n.get_float("alpha", 0.01f);
  Op op;
  op.fn = [alpha](const graph::Tensors& in) {
    return graph::Tensors{torch::leaky_relu(in[0], alpha)};
  };
  return op;
}

}  // namespace tandem::onnx::detail
