// Operators: how one ONNX node computes, as LibTorch calls (autograd gives the backward).
//
// The registry (registry.cc) maps an operator's name to a factory. At load time a factory sees
// the node through a Node: its attributes, which inputs are per-sample tensors (their axis 0
// is the batch) and which are known without the batch (initializers, constants and what is
// computed from them only), the values of the constants, and the shapes ONNX's shape
// inference gave. It refuses what tandem cannot run (Node::refuse: an attribute value it does
// not support, a shape that depends on values computed at run time, an axis that would move
// the batch) and returns an Op: the function from the values of the node's inputs to the
// values of its outputs.
//
// Shapes: B batch (micro-batch), C channels, D,H,W spatial axes.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "proto.h"
#include "tandem/graph/layer.h"

namespace tandem::onnx::detail {

// A shape from shape inference: -1 on unknown axes; nullopt when even the rank is unknown.
using Shape = std::optional<std::vector<int64_t>>;

// The batch size in a shape computed at load time from a per-sample tensor (a Shape node, as
// PyTorch exports x.view(x.size(0), -1)): tandem feeds micro-batches of any size, so it is not
// known. A Reshape takes it at axis 0 as the batch; a node that computes with it, or puts it
// elsewhere, is refused.
inline constexpr int64_t kBatchEntry = -(int64_t{1} << 62);

// One input of a node, as the loader classified it.
struct NodeInput {
  enum class Kind { kOmitted, kBatched, kStatic };
  std::string name;
  Kind kind = Kind::kOmitted;
  // Defined when the input is static and depends on no parameter or buffer: its value.
  torch::Tensor constant;
  Shape shape;
};

// Receives the tensors an operator keeps besides its inputs (batch normalization's count of
// batches): registered as buffers of the node's layer under `state_name`.
using StateSink = std::function<torch::Tensor(const std::string& state_name, torch::Tensor)>;

class Node {
 public:
  Node(const pb::NodeProto& proto, std::string name, int opset, std::vector<NodeInput> inputs,
       std::vector<Shape> output_shapes, StateSink state);

  // The node's name (its layer's name); the operator; the opset of the default domain.
  const std::string& name() const { return name_; }
  const std::string& op() const { return proto_.op_type(); }
  int opset() const { return opset_; }

  // Inputs, counting omitted optional ones (an empty name in ONNX).
  size_t input_count() const { return inputs_.size(); }
  bool has_input(size_t i) const;
  const std::string& input_name(size_t i) const;
  // Whether input i is computed per sample (its axis 0 is the batch).
  bool batched(size_t i) const;
  // Whether input i is known at load time (a constant, not a parameter).
  bool is_constant(size_t i) const;
  // The value of input i, known at load time; refuses (naming `what`, e.g. "shape") when it is
  // computed from the batch or from parameters: a shape tandem cannot resolve.
  const torch::Tensor& constant(size_t i, const char* what) const;
  // Integer values of a constant input (shape, axes, pads).
  std::vector<int64_t> constant_ints(size_t i, const char* what) const;
  const Shape& input_shape(size_t i) const;
  // The rank of input i where known, else -1.
  int64_t input_rank(size_t i) const;
  const Shape& output_shape(size_t k) const;
  size_t output_count() const { return static_cast<size_t>(proto_.output_size()); }
  const std::string& output_name(size_t k) const { return proto_.output(static_cast<int>(k)); }

  // Attributes, with the defaults of the operator's specification.
  bool has(const char* attr) const;
  int64_t get_int(const char* attr, int64_t fallback) const;
  float get_float(const char* attr, float fallback) const;
  std::string get_string(const char* attr, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const char* attr, std::vector<int64_t> fallback = {}) const;
  std::vector<float> get_floats(const char* attr) const;
  torch::Tensor get_tensor(const char* attr) const;

  // Registers a buffer of the node's layer (see StateSink) and returns it; without a layer (a
  // node computed at load time) returns `init`.
  torch::Tensor add_buffer(const std::string& state_name, torch::Tensor init) const;

  // Throws tandem::Error: "ONNX node 'name' (Op): why".
  [[noreturn]] void refuse(const std::string& why) const;
  // Refuses unless axis 0 (the batch) of batched input `i` stays axis 0: `axis` is the axis
  // the operator works on (negative: from the end), `rank` the input's rank (-1: unknown,
  // then a negative axis is checked at run time by the operator itself).
  void refuse_batch_axis(size_t i, int64_t axis, int64_t rank, const char* what) const;

 private:
  const pb::AttributeProto* find(const char* attr) const;

  const pb::NodeProto& proto_;
  std::string name_;
  int opset_;
  std::vector<NodeInput> inputs_;
  std::vector<Shape> output_shapes_;
  StateSink state_;
};

// The values of the node's outputs from the values of its inputs, in ONNX order (an omitted
// optional input is an undefined tensor).
using OpFn = std::function<graph::Tensors(const graph::Tensors& inputs)>;

struct Op {
  OpFn fn;
  // How many of the node's outputs fn computes: later outputs (batch normalization's running
  // statistics, max pooling's indices) are not computed, and a graph that reads them is refused.
  int outputs = 1;
  // Multiply-adds per sample, where the shapes are known (Conv, Gemm, MatMul); else 0.
  double flops_per_sample = 0;
};

using Factory = Op (*)(const Node& node);

// What an operator does to the axis a spatial split cuts (--spatial: the depth, axis 2 of the
// graph input [B,C,D,H,W]) when every sample arrives as a slab of planes along it.
struct SlabStep {
  std::string refused;  // why the node cannot run on slabs; empty: it can
  int64_t down = 1;     // output planes = input planes / down (pooling, a strided window)
  int64_t up = 1;       // output planes = input planes x up (a transposed window, up-sampling)
  int64_t halo = 0;     // planes it needs from each neighbouring slab (a "same" convolution)
  int64_t axis = -1;    // the depth's axis in the outputs where the node moves it; -1: kept
};
// A node's step, from its attributes and static operands, at load time. `axis`: the depth's
// axis in the node's per-sample inputs (2, unless a Transpose or Reshape before it moved it).
using SlabRule = SlabStep (*)(const Node& node, int64_t axis);

// An operator tandem runs, and the roles of the initializers it reads directly.
struct OperatorEntry {
  const char* name;
  Factory make;
  // Inputs whose initializers are trained (weights, biases, scales).
  std::vector<int> weights;
  // Inputs whose initializers are buffers the operator updates (running statistics).
  std::vector<int> buffers;
  // How it runs on slabs; null: it mixes the split axis with others (refused on slabs).
  SlabRule slab = nullptr;
};

// The entry of `op`, or null when tandem does not run it.
const OperatorEntry* find_operator(const std::string& op);
// Every operator tandem runs, sorted.
std::vector<std::string> supported_operators();

// Per-sample product of the known axes 1.. of `shape`; 0 when any is unknown.
double per_sample_elements(const Shape& shape);

}  // namespace tandem::onnx::detail
