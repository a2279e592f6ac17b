#include "operator.h"
#include "tandem/common/check.h"

namespace tandem::onnx::detail {

Node::Node(const pb::NodeProto& proto, std::string name, int opset, std::vector<NodeInput> inputs,
           std::vector<Shape> output_shapes, StateSink state)
    : proto_(proto),
      name_(std::move(name)),
      opset_(opset),
      inputs_(std::move(inputs)),
      output_shapes_(std::move(output_shapes)),
      state_(std::move(state)) {}

bool Node::has_input(size_t i) const {
  return i < inputs_.size() && inputs_[i].kind != NodeInput::Kind::kOmitted;
}

const std::string& Node::input_name(size_t i) const {
  static const std::string none;
  return i < inputs_.size() ? inputs_[i].name : none;
}

bool Node::batched(size_t i) const {
  return i < inputs_.size() && inputs_[i].kind == NodeInput::Kind::kBatched;
}

bool Node::is_constant(size_t i) const { return has_input(i) && inputs_[i].constant.defined(); }

const torch::Tensor& Node::constant(size_t i, const char* what) const {
  if (!has_input(i)) refuse(fmt::format("its {} (input {}) is missing", what, i));
  if (batched(i)) {
    refuse(fmt::format(
        "its {} ('{}') is computed from the batch at run time: a dynamic shape tandem cannot "
        "resolve. Export with the {} as a constant, or computed from Shape nodes of tensors "
        "whose axes after the batch have fixed sizes (tf2onnx folds constants by default)",
        what, inputs_[i].name, what));
  }
  if (!inputs_[i].constant.defined()) {
    refuse(fmt::format("its {} ('{}') is computed from trained parameters; it must be a constant",
                       what, inputs_[i].name));
  }
  return inputs_[i].constant;
}

std::vector<int64_t> Node::constant_ints(size_t i, const char* what) const {
  const torch::Tensor& t = constant(i, what);
  if (t.is_floating_point()) refuse(fmt::format("its {} holds floats, not integers", what));
  const torch::Tensor c = t.to(torch::kInt64).contiguous().flatten();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

const Shape& Node::input_shape(size_t i) const {
  static const Shape unknown;
  return i < inputs_.size() ? inputs_[i].shape : unknown;
}

int64_t Node::input_rank(size_t i) const {
  const Shape& s = input_shape(i);
  return s ? static_cast<int64_t>(s->size()) : -1;
}

const Shape& Node::output_shape(size_t k) const {
  static const Shape unknown;
  return k < output_shapes_.size() ? output_shapes_[k] : unknown;
}

const pb::AttributeProto* Node::find(const char* attr) const {
  for (const auto& a : proto_.attribute())
    if (a.name() == attr) return &a;
  return nullptr;
}

bool Node::has(const char* attr) const { return find(attr) != nullptr; }

int64_t Node::get_int(const char* attr, int64_t fallback) const {
  const pb::AttributeProto* a = find(attr);
  return a ? a->i() : fallback;
}

float Node::get_float(const char* attr, float fallback) const {
  const pb::AttributeProto* a = find(attr);
  return a ? a->f() : fallback;
}

std::string Node::get_string(const char* attr, const std::string& fallback) const {
  const pb::AttributeProto* a = find(attr);
  return a ? a->s() : fallback;
}

std::vector<int64_t> Node::get_ints(const char* attr, std::vector<int64_t> fallback) const {
  const pb::AttributeProto* a = find(attr);
  if (!a) return fallback;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<float> Node::get_floats(const char* attr) const {
  const pb::AttributeProto* a = find(attr);
  if (!a) return {};
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

torch::Tensor Node::get_tensor(const char* attr) const {
  const pb::AttributeProto* a = find(attr);
  if (!a || !a->has_t()) refuse(fmt::format("it has no tensor attribute '{}'", attr));
  return to_tensor(a->t(), fmt::format("the '{}' attribute of ONNX node '{}'", attr, name_));
}

torch::Tensor Node::add_buffer(const std::string& state_name, torch::Tensor init) const {
  return state_ ? state_(state_name, std::move(init)) : init;
}

void Node::refuse(const std::string& why) const {
  throw Error(fmt::format("ONNX node '{}' ({}): {}", name_, op(), why));
}

void Node::refuse_batch_axis(size_t i, int64_t axis, int64_t rank, const char* what) const {
  if (!batched(i)) return;
  const bool first = axis == 0 || (rank > 0 && axis == -rank);
  if (first) {
    refuse(fmt::format(
        "its {} is axis 0 of '{}', the batch axis: tandem splits the batch into micro-batches, so "
        "an operator must keep axis 0 as the batch",
        what, input_name(i)));
  }
}

double per_sample_elements(const Shape& shape) {
  if (!shape || shape->empty()) return 0;
  double n = 1;
  for (size_t i = 1; i < shape->size(); ++i) {
    if ((*shape)[i] < 0) return 0;
    n *= static_cast<double>((*shape)[i]);
  }
  return n;
}

}  // namespace tandem::onnx::detail
