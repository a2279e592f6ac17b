// The factories of the operators tandem runs (operator.h), one group per file:
//   op_conv.cc         Conv, ConvTranspose
//   op_gemm.cc         Gemm, MatMul
//   op_elementwise.cc  Add, Sub, Mul, Div, Pow, Relu, LeakyRelu, Sigmoid, Tanh, Erf, Sqrt,
//                      Identity
//   op_softmax.cc      Softmax, LogSoftmax
//   op_pool.cc         MaxPool, AveragePool, GlobalAveragePool
//   op_norm.cc         BatchNormalization, InstanceNormalization
//   op_shape.cc        Concat, Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Shape, Gather
//   op_math.cc         Clip, PRelu, ReduceMean, LayerNormalization, Cast
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
// A Conv node whose input is the concatenation of `parts` per-sample tensors along the channels
// (a Concat node that only this Conv reads, folded into it): `conv`, its Op, takes the parts in
// x's place, followed by the weight and bias. A 3D convolution of odd cubic kernel, stride 1 and
// "same" padding keeps the parts, never a copy of their concatenation
// (models::split_conv3d_concat); any other concatenates them and runs `conv`.
Op conv_of_concatenation(const Node& n, size_t parts, Op conv);
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
Op make_shape(const Node& n);
Op make_gather(const Node& n);
// Shape node n of a per-sample input of shape `s` (its batch axis first, any size), at load
// time: kBatchEntry for the batch (operator.h).
torch::Tensor shape_of_batched(const Node& n, const Shape& s);
Op make_erf(const Node& n);
Op make_cast(const Node& n);
Op make_sqrt(const Node& n);
Op make_pow(const Node& n);
Op make_clip(const Node& n);
Op make_prelu(const Node& n);
Op make_reduce_mean(const Node& n);
Op make_layer_normalization(const Node& n);
Op make_resize(const Node& n);
Op make_upsample(const Node& n);
Op make_pad(const Node& n);
Op make_dropout(const Node& n);
Op make_constant(const Node& n);

}  // namespace tandem::onnx::detail
