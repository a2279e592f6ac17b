// load(): the ONNX graph as tandem layers. analysis.cc decides what every tensor is; here the
// static part is computed (constants) or kept as expressions of parameters, and every node
// that reads a per-sample tensor becomes a layer that owns the initializers it uses.
#include "tandem/onnx/load.h"

#include <torch/torch.h>

#include <set>

#include "analysis.h"
#include "ops.h"
#include "slab_rules.h"
#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"

namespace tandem::onnx {
namespace detail {
namespace {

// A tensor known without the batch: a constant, an initializer kept as state (a parameter or
// buffer of the layer that uses it), or an expression of those computed in that layer.
struct Static {
  torch::Tensor constant;
  std::string state;  // the initializer's name
  OpFn fn;            // expression: output `output` of fn(args)
  std::vector<Static> args;
  int output = 0;
};

// The tensors one layer owns (its initializers, parameters or buffers, under keys t0, t1, ...)
// as a module LibTorch can clone for another device: reset() registers tensors of the same
// shapes, which Cloneable::clone then fills with copies of the values.
class LayerState : public torch::nn::Cloneable<LayerState> {
 public:
  explicit LayerState(const std::string& op) : torch::nn::Cloneable<LayerState>("onnx::" + op) {}

  // Registers `value` under the next key; returns the key.
  std::string add(torch::Tensor value, bool parameter) {
    const std::string key = fmt::format("t{}", specs_.size());
    specs_.push_back({key, value.sizes().vec(), value.options(), parameter});
    if (parameter) {
      register_parameter(key, std::move(value));
    } else {
      register_buffer(key, std::move(value));
    }
    return key;
  }

  void reset() override {
    for (const Spec& s : specs_) {
      torch::Tensor t = torch::empty(s.sizes, s.options);
      if (s.parameter) {
        register_parameter(s.key, t);
      } else {
        register_buffer(s.key, t);
      }
    }
  }

  // The module's tensors in key order (a clone's, for a clone).
  static std::vector<torch::Tensor> tensors(const torch::nn::Module& m, size_t count) {
    // The dictionaries are copies: keep them while their entries are read.
    const auto parameters = m.named_parameters(false);
    const auto buffers = m.named_buffers(false);
    std::vector<torch::Tensor> out;
    for (size_t k = 0; k < count; ++k) {
      const std::string key = fmt::format("t{}", k);
      const torch::Tensor* t = parameters.find(key);
      if (!t) t = buffers.find(key);
      TANDEM_ASSERT(t, "layer state {} is missing", key);
      out.push_back(*t);
    }
    return out;
  }

 private:
  struct Spec {
    std::string key;
    std::vector<int64_t> sizes;
    torch::TensorOptions options;
    bool parameter;
  };
  std::vector<Spec> specs_;
};

// Whether a static value holds the batch size of a per-sample tensor's shape (kBatchEntry).
bool holds_batch_entry(const torch::Tensor& t) {
  return t.defined() && !t.is_floating_point() && t.numel() > 0 &&
         t.to(torch::kInt64).eq(kBatchEntry).any().item<bool>();
}

// One operand of a layer's node, evaluated at each forward from the layer's state tensors (in
// key order) and the layer's inputs.
using Operand = std::function<torch::Tensor(const std::vector<torch::Tensor>& state,
                                            const graph::Tensors& layer_inputs)>;

class Builder {
 public:
  explicit Builder(const Analysis& a)
      : a_(a),
        slabs_(a.input,
               a.input_shape.empty() ? 0 : 1 + static_cast<int64_t>(a.input_shape.size())) {}

  graph::Model build();

 private:
  std::vector<NodeInput> node_inputs(const pb::NodeProto& n) const;
  std::vector<Shape> output_shapes(const pb::NodeProto& n) const;
  void add_static(int index);
  void add_shape(int index, const graph::Model& model);
  Shape dry_shape(const std::string& tensor, const graph::Model& model) const;
  void add_layer(int index, graph::Model& model);
  bool folds_into_conv(int index) const;

  const Analysis& a_;
  // A Concat's output that the one Conv reading it takes as its parts: the Concat's inputs.
  std::map<std::string, std::vector<std::string>> folded_;
  std::map<std::string, Static> statics_;
  std::map<std::string, std::string> owner_;  // initializer -> the layer that holds it
  SlabWalk slabs_;
};

std::vector<NodeInput> Builder::node_inputs(const pb::NodeProto& n) const {
  std::vector<NodeInput> inputs;
  for (const auto& t : n.input()) {
    NodeInput in;
    in.name = t;
    in.shape = a_.shape(t);
    if (t.empty()) {
      in.kind = NodeInput::Kind::kOmitted;
    } else if (a_.batched.count(t)) {
      in.kind = NodeInput::Kind::kBatched;
    } else {
      in.kind = NodeInput::Kind::kStatic;
      in.constant = statics_.at(t).constant;
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

std::vector<Shape> Builder::output_shapes(const pb::NodeProto& n) const {
  std::vector<Shape> shapes;
  for (const auto& t : n.output()) shapes.push_back(a_.shape(t));
  return shapes;
}

// A node that reads no per-sample tensor: computed now when it reads constants only, else an
// expression of the parameters it reads (a Transpose of a weight), computed by its user.
void Builder::add_static(int index) {
  const pb::NodeProto& n = a_.node(index);
  const Node node(n, a_.layer_names[index], a_.opset, node_inputs(n), output_shapes(n), nullptr);
  // The batch size may be moved about (picked, unsqueezed, concatenated into a shape) but not
  // computed with: tandem does not know it.
  static const std::set<std::string> moves = {"Gather", "Unsqueeze", "Squeeze", "Concat",
                                              "Identity"};
  if (!moves.count(n.op_type()))
    for (size_t i = 0; i < node.input_count(); ++i)
      if (node.is_constant(i) && holds_batch_entry(node.constant(i, "operand")))
        node.refuse(fmt::format(
            "it computes with the batch size ('{}' holds it, from the shape of a per-sample "
            "tensor), which tandem leaves free: micro-batches of any size run",
            node.input_name(i)));
  const Op op = find_operator(n.op_type())->make(node);
  std::vector<Static> args;
  bool constant = true;
  for (const auto& t : n.input()) {
    args.push_back(t.empty() ? Static{} : statics_.at(t));
    constant = constant && (t.empty() || args.back().constant.defined());
  }
  graph::Tensors values;
  if (constant) {
    torch::NoGradGuard no_grad;
    graph::Tensors in;
    for (const Static& s : args) in.push_back(s.constant);
    values = op.fn(in);
  }
  for (int k = 0; k < n.output_size(); ++k) {
    if (n.output(k).empty()) continue;
    Static s;
    if (k >= op.outputs) {
      if (a_.readers.count(n.output(k)))
        node.refuse(
            fmt::format("its output {} ('{}') is read, but tandem computes only its "
                        "first {}",
                        k, n.output(k), op.outputs));
      continue;
    }
    if (constant) {
      s.constant = values[static_cast<size_t>(k)];
    } else {
      s.fn = op.fn;
      s.args = args;
      s.output = k;
    }
    statics_[n.output(k)] = std::move(s);
  }
}

// A Shape node of a per-sample tensor: its value at load time, the batch left free. The
// tensor's shape comes from ONNX's shape inference or, where that does not know it (a Reshape
// to a shape computed from another Shape: ONNX infers no further), from the layers built so far
// run on one sample of zeros.
void Builder::add_shape(int index, const graph::Model& model) {
  const pb::NodeProto& n = a_.node(index);
  const Node node(n, a_.layer_names[index], a_.opset, node_inputs(n), output_shapes(n), nullptr);
  Shape shape = node.input_shape(0);
  if (!shape || std::any_of(shape->begin() + 1, shape->end(), [](int64_t d) { return d < 0; }))
    shape = dry_shape(n.input(0), model);
  Static s;
  s.constant = shape_of_batched(node, shape);
  statics_[n.output(0)] = std::move(s);
}

Shape Builder::dry_shape(const std::string& tensor, const graph::Model& model) const {
  const std::vector<int64_t>& sample = a_.input_shape;
  if (sample.empty() || std::any_of(sample.begin(), sample.end(), [](int64_t d) { return d < 0; }))
    return std::nullopt;
  torch::NoGradGuard no_grad;
  std::vector<int64_t> batch{1};
  batch.insert(batch.end(), sample.begin(), sample.end());
  std::map<std::string, torch::Tensor> env{{a_.input, torch::zeros(batch)}};
  for (size_t i = 0; i < model.layers.size() && !env.count(tensor); ++i) {
    const graph::Layer& layer = model.layers[i];
    graph::CallContext call;
    call.layer = static_cast<int>(i);
    call.training = false;
    graph::ScopedCall scoped(call);
    graph::Tensors in;
    for (const auto& name : layer.inputs) in.push_back(env.at(name));
    graph::Tensors out = layer.forward(in);
    for (size_t k = 0; k < out.size(); ++k) env[layer.outputs[k]] = out[k];
  }
  const auto it = env.find(tensor);
  if (it == env.end()) return std::nullopt;
  std::vector<int64_t> dims = it->second.sizes().vec();
  dims[0] = -1;
  return dims;
}

void Builder::add_layer(int index, graph::Model& model) {
  const pb::NodeProto& n = a_.node(index);
  graph::Layer layer;
  layer.name = a_.layer_names[index];
  std::shared_ptr<LayerState> module;
  std::map<std::string, size_t> held;  // initializer -> its index in the layer's state
  auto hold = [&](const std::string& state_name, torch::Tensor value, bool parameter) {
    if (!module) module = std::make_shared<LayerState>(n.op_type());
    const size_t index = layer.state_names.size();
    layer.state_names[module->add(value, parameter)] = state_name;
    held[state_name] = index;
    return index;
  };
  // An initializer's index in the layer's state, registered the first time it is used here.
  auto state = [&](const std::string& name) {
    if (auto it = held.find(name); it != held.end()) return it->second;
    auto [owner, fresh] = owner_.emplace(name, layer.name);
    TANDEM_CHECK(fresh,
                 "initializer '{}' is used by ONNX nodes '{}' and '{}', which tandem runs as two "
                 "layers; each layer owns its parameters, so tied weights are not supported",
                 name, owner->second, layer.name);
    const pb::TensorProto& proto = *a_.initializers.at(name);
    torch::Tensor value = to_tensor(proto, fmt::format("initializer '{}'", name));
    return hold(name, value, a_.roles.at(name) == Role::kParameter);
  };
  using State = std::vector<torch::Tensor>;
  std::function<Operand(const Static&)> operand = [&](const Static& s) -> Operand {
    if (s.constant.defined())
      return [c = s.constant](const State&, const graph::Tensors&) { return c; };
    if (!s.state.empty())
      return [k = state(s.state)](const State& st, const graph::Tensors&) { return st[k]; };
    if (!s.fn) return [](const State&, const graph::Tensors&) { return torch::Tensor(); };
    std::vector<Operand> args;
    for (const Static& arg : s.args) args.push_back(operand(arg));
    return [fn = s.fn, args, k = s.output](const State& st, const graph::Tensors& in) {
      graph::Tensors values;
      for (const Operand& arg : args) values.push_back(arg(st, in));
      return fn(values)[static_cast<size_t>(k)];
    };
  };
  std::vector<Operand> operands;
  std::vector<std::string> operand_names(n.input().begin(), n.input().end());
  const auto folded = n.input_size() > 0 ? folded_.find(n.input(0)) : folded_.end();
  if (folded != folded_.end()) {
    operand_names.erase(operand_names.begin());
    operand_names.insert(operand_names.begin(), folded->second.begin(), folded->second.end());
  }
  for (const auto& t : operand_names) {
    if (t.empty()) {
      operands.push_back([](const State&, const graph::Tensors&) { return torch::Tensor(); });
    } else if (a_.batched.count(t)) {
      auto pos = std::find(layer.inputs.begin(), layer.inputs.end(), t);
      if (pos == layer.inputs.end()) pos = layer.inputs.insert(layer.inputs.end(), t);
      const size_t k = static_cast<size_t>(pos - layer.inputs.begin());
      operands.push_back([k](const State&, const graph::Tensors& in) { return in[k]; });
    } else {
      operands.push_back(operand(statics_.at(t)));
    }
  }
  // State an operator keeps for itself (batch normalization's count of batches) is captured by
  // its function: such a layer cannot be copied for another device.
  bool keeps_state = false;
  StateSink sink = [&](const std::string& name, torch::Tensor init) {
    keeps_state = true;
    return LayerState::tensors(*module, hold(name, std::move(init), /*parameter=*/false) + 1)
        .back();
  };
  const Node node(n, layer.name, a_.opset, node_inputs(n), output_shapes(n), sink);
  for (size_t i = 0; i < node.input_count(); ++i)
    if (node.is_constant(i) && holds_batch_entry(node.constant(i, "operand")) &&
        !(n.op_type() == "Reshape" && i == 1))
      node.refuse(fmt::format(
          "it computes with the batch size ('{}' holds it, from the shape of a per-sample "
          "tensor), which tandem leaves free: micro-batches of any size run",
          node.input_name(i)));
  const Op op = folded == folded_.end()
                    ? find_operator(n.op_type())->make(node)
                    : conv_of_concatenation(node, folded->second.size(),
                                            find_operator(n.op_type())->make(node));
  // Its convolution defers its weight gradient under a split backward (models/split_conv.h).
  layer.splits_backward = folded != folded_.end();
  slabs_.add(node);
  std::vector<size_t> kept;  // the node's outputs a later node or the loss reads
  for (int k = 0; k < n.output_size(); ++k) {
    const std::string& t = n.output(k);
    if (t.empty() || (!a_.readers.count(t) && t != a_.output)) continue;
    if (k >= op.outputs)
      node.refuse(fmt::format("its output {} ('{}') is read, but tandem computes only its first {}",
                              k, t, op.outputs));
    kept.push_back(static_cast<size_t>(k));
    layer.outputs.push_back(t);
  }
  layer.forward_flops_per_sample = op.flops_per_sample;
  graph::BindFn bind = [fn = op.fn, operands, kept,
                        count = held.size()](const std::shared_ptr<torch::nn::Module>& m) {
    State state = m ? LayerState::tensors(*m, count) : State{};
    return graph::ForwardFn([fn, operands, kept, state](const graph::Tensors& in) {
      graph::Tensors args;
      args.reserve(operands.size());
      for (const Operand& o : operands) args.push_back(o(state, in));
      graph::Tensors all = fn(args);
      graph::Tensors out;
      for (size_t k : kept) out.push_back(std::move(all[k]));
      return out;
    });
  };
  layer.module = module;
  layer.forward = bind(module);
  if (!keeps_state) layer.bind = std::move(bind);
  model.layers.push_back(std::move(layer));
}

// Whether node `index` is a Concat of per-sample tensors along the channels (axis 1) whose
// output only a Conv reads, as its input x: the Conv then keeps the parts, not a copy of their
// concatenation (the decoder of a U-Net: the up-sampled tensor and the skip, which the encoder
// keeps anyway).
bool Builder::folds_into_conv(int index) const {
  const pb::NodeProto& n = a_.node(index);
  if (n.op_type() != "Concat" || n.output_size() != 1 || n.input_size() < 2) return false;
  const std::string& out = n.output(0);
  const auto readers = a_.readers.find(out);
  if (out == a_.output || readers == a_.readers.end() || readers->second != 1) return false;
  for (const auto& t : n.input())
    if (t.empty() || !a_.batched.count(t) || folded_.count(t)) return false;
  int64_t axis = 0;
  for (const auto& attr : n.attribute())
    if (attr.name() == "axis") axis = attr.i();
  if (axis != 1) return false;
  for (int j = index + 1; j < a_.graph->node_size(); ++j) {
    const pb::NodeProto& reader = a_.node(j);
    if (std::find(reader.input().begin(), reader.input().end(), out) == reader.input().end())
      continue;
    return a_.needed[static_cast<size_t>(j)] && reader.op_type() == "Conv" &&
           reader.input(0) == out;
  }
  return false;
}

graph::Model Builder::build() {
  for (const auto& [name, proto] : a_.initializers) {
    Static s;
    if (a_.roles.count(name)) {
      s.state = name;
    } else {
      s.constant = to_tensor(*proto, fmt::format("initializer '{}'", name));
    }
    statics_[name] = std::move(s);
  }
  graph::Model model;
  model.name = "onnx:" + (a_.graph->name().empty() ? std::string("graph") : a_.graph->name());
  model.input = a_.input;
  model.output = a_.output;
  model.input_shape = a_.input_shape;
  for (int i = 0; i < a_.graph->node_size(); ++i) {
    if (!a_.needed[static_cast<size_t>(i)]) continue;
    bool per_sample = false;
    for (const auto& t : a_.node(i).input()) per_sample = per_sample || a_.batched.count(t);
    if (per_sample && a_.node(i).op_type() == "Shape") {
      add_shape(i, model);
    } else if (per_sample && folds_into_conv(i)) {
      // Not a layer of its own: the Conv after it takes its inputs (conv_of_concatenation).
      const pb::NodeProto& n = a_.node(i);
      slabs_.add(Node(n, a_.layer_names[static_cast<size_t>(i)], a_.opset, node_inputs(n),
                      output_shapes(n), nullptr));
      folded_[n.output(0)] = {n.input().begin(), n.input().end()};
    } else if (per_sample) {
      add_layer(i, model);
    } else {
      add_static(i);
    }
  }
  slabs_.finish(a_.output, model);
  model.loss = a_.loss->loss(a_.taken_over);
  model.metric = a_.loss->metric(a_.taken_over);
  model.metric_name = a_.loss->metric_name;
  model.prediction = a_.loss->prediction(a_.taken_over);
  model.validate();
  return model;
}

}  // namespace
}  // namespace detail

graph::Model load(const std::string& path, const LoadOptions& options) {
  const detail::pb::ModelProto proto = detail::read_model_file(path);
  const detail::Analysis analysis = detail::analyze(proto, path, options.loss, options.output);
  return detail::Builder(analysis).build();
}

std::vector<std::string> supported_operators() { return detail::supported_operators(); }
std::vector<std::string> losses() { return detail::loss_names(); }

}  // namespace tandem::onnx
