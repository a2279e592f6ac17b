// ONNX graphs under a spatial split (--spatial): every sample arrives as a slab of planes along
// axis 2 of the graph input (the depth of [B,C,D,H,W]), and every per-sample tensor of the graph
// holds the same slab of its own volume, at its own resolution (a quarter of the planes after
// two poolings by 2).
//
// Each operator says in the registry how it runs on slabs (operator.h, SlabStep): locally (an
// element-wise operator, a concatenation of channels), down or up by a whole factor (pooling,
// a window whose kernel is its stride, nearest up-sampling), with halos from the neighbouring
// slabs (a stride-1 convolution with "same" padding), or not at all (a Flatten, a
// BatchNormalization over the batch and the volume). A Transpose (as tf2onnx writes them
// around a Keras graph's layers) or a Reshape that keeps the planes whole moves the depth to
// another axis; the operators after it follow it there, and a node is refused only where its
// operator mixes planes across the depth. SlabWalk follows the graph's layer nodes in order
// and decides whether the graph can be cut, and the slab sizes that keep every pooling and
// up-sampling inside a slab.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "operator.h"
#include "tandem/graph/model.h"

namespace tandem::onnx::detail {

// Rules for the registry (registry.cc); the Resize and Upsample rules are in op_resize.cc.
// Operators that read a layout ([B,C,D,...]: convolutions, poolings, normalizations per
// instance, up-sampling) run on slabs only with the depth on axis 2; the others follow it to
// wherever a Transpose or Reshape moved it.
SlabStep slab_local(const Node& n, int64_t axis);      // the same planes in and out
SlabStep slab_broadcast(const Node& n, int64_t axis);  // Add, Sub, Mul, Div: static operands
                                                       // flat in depth
SlabStep slab_layout(const Node& n, int64_t axis);     // per position, on [B,C,D,...]: axis 2
SlabStep slab_conv(const Node& n, int64_t axis);
SlabStep slab_conv_transpose(const Node& n, int64_t axis);
SlabStep slab_pool(const Node& n, int64_t axis);  // MaxPool, AveragePool
SlabStep slab_concat(const Node& n, int64_t axis);
SlabStep slab_softmax(const Node& n, int64_t axis);  // Softmax, LogSoftmax
SlabStep slab_pad(const Node& n, int64_t axis);
SlabStep slab_transpose(const Node& n, int64_t axis);
SlabStep slab_reshape(const Node& n, int64_t axis);
SlabStep slab_gather(const Node& n, int64_t axis);
SlabStep slab_reduce(const Node& n, int64_t axis);       // ReduceMean
SlabStep slab_layer_norm(const Node& n, int64_t axis);   // LayerNormalization
SlabStep slab_batch_norm(const Node& n, int64_t axis);   // refused, with the reason
SlabStep slab_global_pool(const Node& n, int64_t axis);  // refused, with the reason
SlabStep slab_resize(const Node& n, int64_t axis);
SlabStep slab_upsample(const Node& n, int64_t axis);

// Refuses a layout operator's node whose input holds the depth on `axis`, not axis 2 (empty
// when it is on axis 2).
std::string depth_not_on_axis_2(int64_t axis);

class SlabWalk {
 public:
  // `input`: the graph input; `input_rank`: its rank with the batch axis (0: unknown).
  SlabWalk(const std::string& input, int64_t input_rank);

  // A node that reads a per-sample tensor, in graph order, with the outputs the model keeps.
  void add(const Node& node);

  // Sets model.slab_dim, slab_multiple and slab_refusal for the graph output `output`.
  void finish(const std::string& output, graph::Model& model) const;

 private:
  // A tensor's planes per plane of the input's slab: num / den, in lowest terms; and the axis
  // that holds them.
  struct Ratio {
    int64_t num = 1, den = 1;
    int64_t axis = 2;
  };

  std::map<std::string, Ratio> ratio_;
  std::string refused_;   // the first reason the graph cannot be cut; empty: it can
  int64_t multiple_ = 1;  // every slab's planes are a multiple of this
  int64_t least_ = 1;     // and at least this many (the widest halo at its resolution)
};

}  // namespace tandem::onnx::detail
