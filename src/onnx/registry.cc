// The operator registry: every operator tandem runs, with its factory and the roles of the
// initializers it reads (which are trained, which are running statistics). Adding an
// operator adds one line here and its factory in an op_*.cc file; the last field, where given,
// is how the operator runs on the slabs of a spatial split (slab_rules.h).
#include <algorithm>

#include "ops.h"
#include "slab_rules.h"

namespace tandem::onnx::detail {
namespace {

const std::vector<OperatorEntry>& table() {
  static const std::vector<OperatorEntry> entries = {
      {"Add", make_add, {}, {}, slab_broadcast},
      {"AveragePool", make_average_pool, {}, {}, slab_pool},
      {"BatchNormalization", make_batch_normalization, {1, 2}, {3, 4}, slab_batch_norm},
      {"Concat", make_concat, {}, {}, slab_concat},
      {"Cast", make_cast, {}, {}, slab_local},
      {"Clip", make_clip, {}, {}, slab_broadcast},
      {"Constant", make_constant, {}, {}},
      {"Conv", make_conv, {1, 2}, {}, slab_conv},
      {"ConvTranspose", make_conv_transpose, {1, 2}, {}, slab_conv_transpose},
      {"Div", make_div, {}, {}, slab_broadcast},
      {"Erf", make_erf, {}, {}, slab_local},
      {"Gather", make_gather, {}, {}, slab_gather},
      {"Dropout", make_dropout, {}, {}, slab_local},
      {"Flatten", make_flatten, {}, {}},
      {"Gemm", make_gemm, {0, 1, 2}, {}},
      {"GlobalAveragePool", make_global_average_pool, {}, {}, slab_global_pool},
      {"Identity", make_identity, {}, {}, slab_local},
      {"InstanceNormalization", make_instance_normalization, {1, 2}, {}, slab_layout},
      {"LayerNormalization", make_layer_normalization, {1, 2}, {}, slab_layer_norm},
      {"LeakyRelu", make_leaky_relu, {}, {}, slab_local},
      {"LogSoftmax", make_log_softmax, {}, {}, slab_softmax},
      {"MatMul", make_matmul, {0, 1}, {}},
      {"MaxPool", make_max_pool, {}, {}, slab_pool},
      {"Mul", make_mul, {}, {}, slab_broadcast},
      {"PRelu", make_prelu, {1}, {}, slab_broadcast},
      {"Pad", make_pad, {}, {}, slab_pad},
      {"Pow", make_pow, {}, {}, slab_broadcast},
      {"ReduceMean", make_reduce_mean, {}, {}, slab_reduce},
      {"Relu", make_relu, {}, {}, slab_local},
      {"Reshape", make_reshape, {}, {}, slab_reshape},
      {"Resize", make_resize, {}, {}, slab_resize},
      {"Shape", make_shape, {}, {}},
      {"Sigmoid", make_sigmoid, {}, {}, slab_local},
      {"Softmax", make_softmax, {}, {}, slab_softmax},
      {"Sqrt", make_sqrt, {}, {}, slab_local},
      {"Squeeze", make_squeeze, {}, {}},
      {"Sub", make_sub, {}, {}, slab_broadcast},
      {"Tanh", make_tanh, {}, {}, slab_local},
      {"Transpose", make_transpose, {}, {}, slab_transpose},
      {"Unsqueeze", make_unsqueeze, {}, {}},
      {"Upsample", make_upsample, {}, {}, slab_upsample},
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
