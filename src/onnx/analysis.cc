#include "analysis.h"

#include <onnx/shape_inference/implementation.h>

#include <functional>

#include "tandem/common/check.h"

namespace tandem::onnx::detail {
namespace {

std::string listed(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

Shape shape_of(const pb::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : type.tensor_type().shape().dim())
    dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return dims;
}

// Shapes from ONNX's shape inference, on a copy of the model. Failing inference leaves shapes
// unknown: they are needed only for FLOPs and for checks made again at run time.
std::map<std::string, Shape> infer_shapes(const pb::ModelProto& model) {
  std::map<std::string, Shape> out;
  pb::ModelProto copy = model;
  try {
    pb::shape_inference::InferShapes(copy);
  } catch (const std::exception&) {
  }
  const pb::GraphProto& g = copy.graph();
  for (const auto& v : g.value_info()) out[v.name()] = shape_of(v.type());
  for (const auto& v : g.input()) out[v.name()] = shape_of(v.type());
  for (const auto& v : g.output()) out[v.name()] = shape_of(v.type());
  for (const auto& t : g.initializer())
    out[t.name()] = std::vector<int64_t>(t.dims().begin(), t.dims().end());
  return out;
}

// The graph's one input (not an initializer: old exporters list those as inputs too).
void find_input(Analysis& a) {
  std::vector<std::string> inputs;
  const pb::ValueInfoProto* info = nullptr;
  for (const auto& v : a.graph->input()) {
    if (a.initializers.count(v.name())) continue;
    inputs.push_back(v.name());
    info = &v;
  }
  TANDEM_CHECK(!inputs.empty(), "the ONNX model '{}' has no graph input", a.path);
  TANDEM_CHECK(inputs.size() == 1,
               "the ONNX model '{}' has {} graph inputs ({}); tandem feeds one input tensor per "
               "sample: export the model with one input (a second graph input '{}' is not "
               "supported)",
               a.path, inputs.size(), listed(inputs), inputs[1]);
  a.input = inputs[0];
  const auto& type = info->type();
  TANDEM_CHECK(
      type.has_tensor_type() && type.tensor_type().elem_type() == pb::TensorProto::FLOAT,
      "the input '{}' of the ONNX model '{}' has element type {}; tandem feeds FLOAT "
      "(float32) batches",
      a.input, a.path,
      type.has_tensor_type() ? type_name(type.tensor_type().elem_type()) : "(not a tensor)");
  const Shape s = shape_of(type);
  TANDEM_CHECK(!s || !s->empty(),
               "the input '{}' of the ONNX model '{}' is a scalar; tandem feeds batches [B,...]",
               a.input, a.path);
  if (s) a.input_shape.assign(s->begin() + 1, s->end());
}

// Layer names: the node's name, or "<Op>_<index>" for a nameless one; made unique.
void name_layers(Analysis& a) {
  std::set<std::string> used;
  for (int i = 0; i < a.graph->node_size(); ++i) {
    const pb::NodeProto& n = a.node(i);
    std::string name = n.name().empty() ? fmt::format("{}_{}", n.op_type(), i) : n.name();
    if (used.count(name)) name = fmt::format("{}_{}", name, i);
    used.insert(name);
    a.layer_names.push_back(name);
  }
}

// Producers, in the order ONNX requires: every input made before it is read.
void find_producers(Analysis& a) {
  for (int i = 0; i < a.graph->node_size(); ++i) {
    const pb::NodeProto& n = a.node(i);
    for (const auto& t : n.input()) {
      TANDEM_CHECK(t.empty() || t == a.input || a.initializers.count(t) || a.producer.count(t),
                   "ONNX node '{}' ({}) reads '{}', which no earlier node produces (the graph "
                   "must be in topological order, without subgraphs)",
                   a.layer_names[i], n.op_type(), t);
    }
    for (const auto& t : n.output()) {
      if (t.empty()) continue;
      TANDEM_CHECK(!a.producer.count(t) && !a.initializers.count(t) && t != a.input,
                   "ONNX node '{}' produces '{}', which exists already", a.layer_names[i], t);
      a.producer[t] = i;
    }
  }
}

void choose_output(Analysis& a, const std::string& wanted) {
  std::vector<std::string> outputs;
  for (const auto& v : a.graph->output()) outputs.push_back(v.name());
  if (wanted.empty()) {
    TANDEM_CHECK(outputs.size() == 1,
                 "the ONNX model '{}' has {} outputs ({}); name the one the loss reads with "
                 "LoadOptions::output",
                 a.path, outputs.size(), listed(outputs));
    a.output = outputs[0];
  } else {
    TANDEM_CHECK(std::find(outputs.begin(), outputs.end(), wanted) != outputs.end(),
                 "LoadOptions::output = {}: the ONNX model '{}' has no output of that name; its "
                 "outputs are {}",
                 wanted, a.path, listed(outputs));
    a.output = wanted;
  }
  TANDEM_CHECK(a.producer.count(a.output),
               "the output '{}' of the ONNX model '{}' is not computed by a node", a.output,
               a.path);
}

std::vector<int64_t> perm_of(const pb::NodeProto& n) {
  if (n.op_type() != "Transpose") return {};
  for (const auto& attr : n.attribute())
    if (attr.name() == "perm") return {attr.ints().begin(), attr.ints().end()};
  return {};
}

// [0, r-1, 1, ..., r-2] (channels last to first) or, with `back`, [0, 2, ..., r-1, 1], for the
// images and volumes of rank r >= 4.
bool layout_perm(const std::vector<int64_t>& perm, bool back) {
  const auto r = static_cast<int64_t>(perm.size());
  if (r < 4 || perm[0] != 0) return false;
  for (int64_t i = 1; i < r; ++i) {
    const int64_t want = back ? (i == r - 1 ? 1 : i + 1) : (i == 1 ? r - 1 : i - 1);
    if (perm[static_cast<size_t>(i)] != want) return false;
  }
  return true;
}

// tf2onnx writes a Keras model channels-last: its input [B,D,H,W,C] goes through a Transpose
// to [B,C,D,H,W] first. tandem's samples are channels-first (NIfTI volumes read as
// [C,Z,Y,X]), so tandem feeds that Transpose's output and leaves the Transpose out, when the
// input has no other reader. The model's input is then [B,C,D,H,W] as for a PyTorch export.
void take_over_input_layout(Analysis& a) {
  int reader = -1;
  for (int i = 0; i < a.graph->node_size(); ++i) {
    if (!a.needed[static_cast<size_t>(i)]) continue;
    for (const auto& t : a.node(i).input()) {
      if (t != a.input) continue;
      if (reader >= 0 && reader != i) return;
      reader = i;
    }
  }
  if (reader < 0) return;
  const std::vector<int64_t> perm = perm_of(a.node(reader));
  if (!layout_perm(perm, false) || a.node(reader).output(0) == a.output) return;
  if (!a.input_shape.empty() && a.input_shape.size() + 1 != perm.size()) return;
  a.input = a.node(reader).output(0);
  if (!a.input_shape.empty()) {
    std::vector<int64_t> shape;
    for (size_t i = 1; i < perm.size(); ++i)
      shape.push_back(a.input_shape[static_cast<size_t>(perm[i] - 1)]);
    a.input_shape = shape;
  }
  a.needed[static_cast<size_t>(reader)] = false;
  a.input_layout = reader;
}

// And its output back to [B,D,H,W,C] last: tandem reads the Transpose's input, channels-first
// as its targets are.
void take_over_output_layout(Analysis& a) {
  if (a.output_layout >= 0) return;
  const int last = a.producer.at(a.output);
  if (!layout_perm(perm_of(a.node(last)), true) || !a.producer.count(a.node(last).input(0))) return;
  a.output = a.node(last).input(0);
  a.output_layout = last;
}

// The loss takes over a final Softmax/LogSoftmax over the classes (axis 1) or a Sigmoid; a
// Softmax over the last axis of a channels-last output with its Transpose
// (take_over_output_layout).
void take_over_final(Analysis& a) {
  const pb::NodeProto& last = a.node(a.producer.at(a.output));
  const auto& ops = a.loss->takes_over;
  if (std::find(ops.begin(), ops.end(), last.op_type()) == ops.end()) return;
  if (last.op_type() == "Softmax" || last.op_type() == "LogSoftmax") {
    const bool coerce = a.opset < 13;
    int64_t axis = coerce ? 1 : -1;
    for (const auto& attr : last.attribute())
      if (attr.name() == "axis") axis = attr.i();
    const Shape s = a.shape(last.input(0));
    const int64_t rank = s ? static_cast<int64_t>(s->size()) : -1;
    const bool classes = (axis == 1 || (rank > 0 && axis + rank == 1)) && (!coerce || rank == 2);
    const auto before = a.producer.find(last.input(0));
    const bool last_axis = (axis == -1 || (rank > 0 && axis == rank - 1)) && !coerce;
    if (!classes && last_axis && a.output_layout < 0 && before != a.producer.end() &&
        layout_perm(perm_of(a.node(before->second)), true)) {
      a.output = last.input(0);
      a.taken_over = true;
      take_over_output_layout(a);
      return;
    }
    TANDEM_CHECK(
        classes,
        "the ONNX model '{}' ends in {} node '{}' over axis {} of a tensor of rank {} "
        "(opset {}); LoadOptions::loss = {} needs the class scores on axis 1: export the {} over "
        "axis 1, or end the graph before it",
        a.path, last.op_type(), a.layer_names[a.producer.at(a.output)], axis,
        rank < 0 ? std::string("unknown") : std::to_string(rank), a.opset, a.loss->name,
        last.op_type());
  }
  a.output = last.input(0);
  a.taken_over = true;
}

void find_needed(Analysis& a) {
  a.needed.assign(static_cast<size_t>(a.graph->node_size()), false);
  std::vector<std::string> todo{a.output};
  while (!todo.empty()) {
    const std::string t = todo.back();
    todo.pop_back();
    auto it = a.producer.find(t);
    if (it == a.producer.end() || a.needed[static_cast<size_t>(it->second)]) continue;
    a.needed[static_cast<size_t>(it->second)] = true;
    for (const auto& in : a.node(it->second).input())
      if (!in.empty()) todo.push_back(in);
  }
}

// Every node the output needs whose operator tandem does not run, named in one message.
void check_operators(const Analysis& a) {
  std::vector<std::string> unknown;
  for (int i = 0; i < a.graph->node_size(); ++i) {
    if (!a.needed[static_cast<size_t>(i)]) continue;
    const pb::NodeProto& n = a.node(i);
    if (is_default_domain(n.domain()) && find_operator(n.op_type())) continue;
    unknown.push_back(fmt::format(
        "{}'{}' uses operator '{}'{}", unknown.empty() ? "ONNX node " : "node ", a.layer_names[i],
        n.op_type(),
        is_default_domain(n.domain()) ? "" : fmt::format(" of domain '{}'", n.domain())));
  }
  TANDEM_CHECK(unknown.empty(), "{}{}, which tandem does not run; tandem runs {} (opsets {} to {})",
               fmt::join(unknown, ", "),
               unknown.size() > 1 ? fmt::format(" ({} nodes)", unknown.size()) : std::string(),
               listed(supported_operators()), kMinOpset, kMaxOpset);
}

void classify(Analysis& a) {
  a.batched.insert(a.input);
  for (int i = 0; i < a.graph->node_size(); ++i) {
    if (!a.needed[static_cast<size_t>(i)]) continue;
    const pb::NodeProto& n = a.node(i);
    bool per_sample = false;
    for (const auto& t : n.input()) per_sample = per_sample || a.batched.count(t);
    for (const auto& t : n.input())
      if (!t.empty()) ++a.readers[t];
    // The shape of a per-sample tensor is known at load time (but for the batch, ops.h).
    if (!per_sample || n.op_type() == "Shape") continue;
    for (const auto& t : n.output())
      if (!t.empty()) a.batched.insert(t);
  }
  TANDEM_CHECK(a.batched.count(a.output),
               "the output '{}' of the ONNX model '{}' does not depend on its input '{}'", a.output,
               a.path, a.input);
}

// Marks the initializers a static tensor is computed from (through parameter-free operators)
// as trained parameters.
void mark_trained(Analysis& a, const std::string& tensor, const std::string& user) {
  if (tensor.empty() || a.batched.count(tensor)) return;
  if (auto it = a.initializers.find(tensor); it != a.initializers.end()) {
    const int type = it->second->data_type();
    if (type != pb::TensorProto::FLOAT) {
      TANDEM_CHECK(type != pb::TensorProto::DOUBLE && type != pb::TensorProto::FLOAT16,
                   "initializer '{}' (read by ONNX node '{}') has element type {}; tandem trains "
                   "float32 parameters: export the model in float32 (model.float() in PyTorch)",
                   tensor, user, type_name(type));
      return;  // integer operands (shapes, axes) stay constants
    }
    auto [role, fresh] = a.roles.emplace(tensor, Role::kParameter);
    TANDEM_CHECK(fresh || role->second == Role::kParameter,
                 "initializer '{}' is a running statistic of one node and a weight of ONNX node "
                 "'{}'; tandem cannot both train and average it",
                 tensor, user);
    return;
  }
  auto p = a.producer.find(tensor);
  if (p == a.producer.end()) return;
  for (const auto& in : a.node(p->second).input()) mark_trained(a, in, user);
}

const pb::NodeProto* producer_of(const Analysis& a, const std::string& tensor) {
  const auto p = a.producer.find(tensor);
  return p == a.producer.end() ? nullptr : &a.node(p->second);
}

// Whether `tensor` is a normalization's output before its scale and shift, as PyTorch exports
// GroupNorm (InstanceNormalization over the groups, then a Reshape back) and, before opset 17,
// LayerNorm (the centred input divided by a Sqrt).
bool normalized(const Analysis& a, const std::string& tensor) {
  const pb::NodeProto* p = producer_of(a, tensor);
  if (p && p->op_type() == "Reshape") p = producer_of(a, p->input(0));
  if (!p) return false;
  if (p->op_type() == "InstanceNormalization") return true;
  if (p->op_type() != "Div" || p->input_size() != 2) return false;
  const pb::NodeProto* divisor = producer_of(a, p->input(1));
  return divisor && divisor->op_type() == "Sqrt";
}

// A normalization's scale and shift, written as a Mul and an Add of static operands after it
// (normalized()): those operands are trained, as the module's weight and bias are.
void mark_affine(Analysis& a, const pb::NodeProto& n, const std::string& name) {
  if ((n.op_type() != "Mul" && n.op_type() != "Add") || n.input_size() != 2) return;
  for (int k = 0; k < 2; ++k) {
    const std::string& in = n.input(k);
    const std::string& other = n.input(1 - k);
    if (!a.batched.count(in) || a.batched.count(other)) continue;
    bool affine = normalized(a, in);
    if (!affine && n.op_type() == "Add") {
      const pb::NodeProto* scale = producer_of(a, in);
      if (scale && scale->op_type() == "Mul" && scale->input_size() == 2)
        for (int j = 0; j < 2; ++j)
          affine =
              affine || (normalized(a, scale->input(j)) && !a.batched.count(scale->input(1 - j)));
    }
    if (affine) mark_trained(a, other, name);
  }
}

void assign_roles(Analysis& a) {
  for (int i = 0; i < a.graph->node_size(); ++i) {
    if (!a.needed[static_cast<size_t>(i)]) continue;
    const pb::NodeProto& n = a.node(i);
    const std::string& name = a.layer_names[i];
    const OperatorEntry* op = find_operator(n.op_type());
    for (int k : op->weights)
      if (k < n.input_size()) mark_trained(a, n.input(k), name);
    for (int k : op->buffers) {
      if (k >= n.input_size() || n.input(k).empty()) continue;
      const std::string& t = n.input(k);
      const auto it = a.initializers.find(t);
      TANDEM_CHECK(it != a.initializers.end() && it->second->data_type() == pb::TensorProto::FLOAT,
                   "ONNX node '{}' ({}) reads its running statistic '{}' from {}; tandem keeps "
                   "running statistics as float32 initializers it updates",
                   name, n.op_type(), t,
                   it == a.initializers.end() ? "a computed tensor" : "a non-float initializer");
      auto [role, fresh] = a.roles.emplace(t, Role::kBuffer);
      TANDEM_CHECK(fresh || role->second == Role::kBuffer,
                   "initializer '{}' is a weight of one node and a running statistic of ONNX "
                   "node '{}'",
                   t, name);
    }
    // A MatMul's bias: the static operand of the Add after it (torch.onnx and tf2onnx both
    // write a dense layer on more than 2-D inputs as MatMul + Add).
    if (n.op_type() == "Add" && n.input_size() == 2) {
      for (int k = 0; k < 2; ++k) {
        auto p = a.producer.find(n.input(k));
        const bool after_matmul = p != a.producer.end() && a.node(p->second).op_type() == "MatMul";
        if (after_matmul && a.batched.count(n.input(k))) mark_trained(a, n.input(1 - k), name);
      }
    }
    mark_affine(a, n, name);
  }
}

}  // namespace

Shape Analysis::shape(const std::string& tensor) const {
  auto it = shapes.find(tensor);
  return it == shapes.end() ? std::nullopt : it->second;
}

Analysis analyze(const pb::ModelProto& model, const std::string& path, const std::string& loss,
                 const std::string& output) {
  Analysis a;
  a.graph = &model.graph();
  a.path = path;
  a.opset = default_opset(model, path);
  a.loss = find_loss(loss);
  TANDEM_CHECK(a.loss, "LoadOptions::loss = {} is unknown; use {}", loss, listed(loss_names()));
  for (const auto& t : a.graph->initializer()) a.initializers[t.name()] = &t;
  find_input(a);
  name_layers(a);
  find_producers(a);
  a.shapes = infer_shapes(model);
  choose_output(a, output);
  take_over_output_layout(a);
  take_over_final(a);
  take_over_output_layout(a);
  find_needed(a);
  take_over_input_layout(a);
  check_operators(a);
  classify(a);
  assign_roles(a);
  return a;
}

}  // namespace tandem::onnx::detail
