// The factories of the operators tandem runs (operator.h), one group per file:
//   op_conv.cc         Conv, ConvTranspose
//   op_gemm.cc         Gemm, MatMul
//   op_elementwise.cc  Add, Sub, Mul, Div, Relu, LeakyRelu, Sigmoid, Tanh, Identity
//   op_softmax.cc      Softmax, LogSoftmax
//   op_pool.cc         MaxPool, AveragePool, GlobalAveragePool
//   op_norm.cc         BatchNormalization, InstanceNormalization
//   op_shape.cc        Concat, Flatten, Reshape, Transpose, Squeeze, Unsqueeze
//   op_resize.cc       Resize, Upsample
//   op_pad.cc          Pad
//   op_misc.cc         Dropout, Constant
// registry.cc lists them by name.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "operator.h"
#include "tandem/common/check.h"

namespace tandem::onnx::detail {

Op make_conv(const Node& n);
Op make_conv_transpose(const Node& n);
Op make_gemm(const Node& n);
Op make_matmul(const Node& n);
Op make_add(const Node& n);
Op make_sub(const Node& n);
Op make_mul(const Node& n);
Op make_div(const Node& n);
Op make_relu(const Node& n);
Op make_leaky_relu(const Node& n);
Op make_sigmoid(const Node& n);
Op make_tanh(const Node& n);
Op make_identity(const Node& n);
Op make_softmax(const Node& n);
Op make_log_softmax(const Node& n);
Op make_max_pool(const Node& n);
Op make_average_pool(const Node& n);
Op make_global_average_pool(const Node& n);
Op make_batch_normalization(const Node& n);
Op make_instance_normalization(const Node& n);
Op make_concat(const Node& n);
Op make_flatten(const Node& n);
Op make_reshape(const Node& n);
Op make_transpose(const Node& n);
Op make_squeeze(const Node& n);
Op make_unsqueeze(const Node& n);
Op make_resize(const Node& n);
Op make_upsample(const Node& n);
Op make_pad(const Node& n);
Op make_dropout(const Node& n);
Op make_constant(const Node& n);

}  // namespace tandem::onnx::detail
