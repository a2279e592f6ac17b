// The operator registry: every operator tandem runs, with its factory and the roles of the
// initializers it reads (which are trained, which are running statistics). Adding an
// operator adds one line here and its factory in an op_*.cc file.
#include <algorithm>

#include "ops.h"

namespace tandem::onnx::detail {
namespace {

const std::vector<OperatorEntry>& table() {
  static const std::vector<OperatorEntry> entries = {
      {"Add", make_add, {}, {}},
      {"AveragePool", make_average_pool, {}, {}},
      {"BatchNormalization", make_batch_normalization, {1, 2}, {3, 4}},
      {"Concat", make_concat, {}, {}},
      {"Constant", make_constant, {}, {}},
      {"Conv", make_conv, {1, 2}, {}},
      {"ConvTranspose", make_conv_transpose, {1, 2}, {}},
      {"Div", make_div, {}, {}},
      {"Dropout", make_dropout, {}, {}},
      {"Flatten", make_flatten, {}, {}},
      {"Gemm", make_gemm, {0, 1, 2}, {}},
      {"GlobalAveragePool", make_global_average_pool, {}, {}},
      {"Identity", make_identity, {}, {}},
      {"InstanceNormalization", make_instance_normalization, {1, 2}, {}},
      {"LeakyRelu", make_leaky_relu, {}, {}},
      {"LogSoftmax", make_log_softmax, {}, {}},
      {"MatMul", make_matmul, {0, 1}, {}},
      {"MaxPool", make_max_pool, {}, {}},
      {"Mul", make_mul, {}, {}},
      {"Pad", make_pad, {}, {}},
      {"Relu", make_relu, {}, {}},
      {"Reshape", make_reshape, {}, {}},
      {"Resize", make_resize, {}, {}},
      {"Sigmoid", make_sigmoid, {}, {}},
      {"Softmax", make_softmax, {}, {}},
      {"Squeeze", make_squeeze, {}, {}},
      {"Sub", make_sub, {}, {}},
      {"Tanh", make_tanh, {}, {}},
      {"Transpose", make_transpose, {}, {}},
      {"Unsqueeze", make_unsqueeze, {}, {}},
      {"Upsample", make_upsample, {}, {}},
  };
  return entries;
}

}  // namespace

const OperatorEntry* find_operator(const std::string& op) {
  for (const OperatorEntry& e : table())
    if (op == e.name) return &e;
  return nullptr;
}

std::vector<std::string> supported_operators() {
  std::vector<std::string> names;
  for (const OperatorEntry& e : table()) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tandem::onnx::detail
