// SampleSizes: whether a graph exported for volumes of any size takes the size the data gives,
// asked of ONNX's shape inference before anything runs. A U-Net with 3 poolings by 2 takes
// multiples of 8 only: at 60 its skip (15 planes) and its up-sampled path (14) cannot be
// concatenated, which LibTorch would say only at the first step.
#include <onnx/shape_inference/implementation.h>

#include "analysis.h"
#include "tandem/common/check.h"
#include "tandem/onnx/load.h"

namespace tandem::onnx {
namespace {

// Strict shape inference of `model` (every node's error thrown); the first error, or "".
std::string inference_error(detail::pb::ModelProto model) {
  try {
    detail::pb::shape_inference::InferShapes(
        model, detail::pb::OpSchemaRegistry::Instance(),
        detail::pb::ShapeInferenceOptions(/*check_type=*/false, /*error_mode=*/1));
  } catch (const std::exception& e) {
    std::string what = e.what();
    // "[ShapeInferenceError] Shape inference error(s): (op_type:Concat, node name: /Concat):
    // [ShapeInferenceError] Can't merge shape info. ...\n(op_type:Conv, ...": the first node's.
    const std::string lead = "Shape inference error(s): ";
    if (const size_t at = what.find(lead); at != std::string::npos)
      what = what.substr(at + lead.size());
    if (const size_t end = what.find('\n'); end != std::string::npos) what = what.substr(0, end);
    // As tandem names nodes: "ONNX node '/Concat' (Concat): Can't merge shape info. ...".
    const std::string op = "(op_type:", name = ", node name: ", tail = "): ";
    const size_t o = what.find(op), n = what.find(name), t = what.find(tail);
    if (o == 0 && n != std::string::npos && t != std::string::npos && o < n && n < t) {
      std::string rest = what.substr(t + tail.size());
      if (rest.rfind('[', 0) == 0 && rest.find("] ") != std::string::npos)
        rest = rest.substr(rest.find("] ") + 2);
      what =
          fmt::format("ONNX node '{}' ({}): {}", what.substr(n + name.size(), t - n - name.size()),
                      what.substr(op.size(), n - op.size()), rest);
    }
    return what.empty() ? "shape inference failed" : what;
  }
  return "";
}

// A copy of `model` without the values of its larger float tensors (weights): inference reads
// their shapes only, and shapes and axes are small integer tensors, which stay.
detail::pb::ModelProto without_weights(detail::pb::ModelProto model) {
  for (auto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.data_type() != detail::pb::TensorProto::FLOAT) continue;
    if (t.raw_data().size() > 256) t.clear_raw_data();
    if (t.float_data_size() > 64) t.clear_float_data();
  }
  return model;
}

}  // namespace

struct SampleSizes::Impl {
  detail::pb::ModelProto model;  // without its weights' values
  int input = -1;                // the graph input's index in model.graph().input()
  std::vector<int64_t> perm;     // the input's layout Transpose that tandem took over, if any
  bool usable = false;  // the input has a shape, and inference follows the graph as declared
};

SampleSizes::SampleSizes(const std::string& path, const LoadOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const detail::pb::ModelProto model = detail::read_model_file(path);
  const detail::Analysis a = detail::analyze(model, path, options.loss, options.output);
  // The graph input's own axes: the sample's, through the layout Transpose tandem took over.
  const std::string& input = a.input_layout >= 0 ? a.node(a.input_layout).input(0) : a.input;
  if (a.input_layout >= 0)
    for (const auto& attr : a.node(a.input_layout).attribute())
      if (attr.name() == "perm") m.perm.assign(attr.ints().begin(), attr.ints().end());
  m.model = without_weights(model);
  for (int i = 0; i < m.model.graph().input_size(); ++i)
    if (m.model.graph().input(i).name() == input) m.input = i;
  m.usable = m.input >= 0 && m.model.graph().input(m.input).type().tensor_type().has_shape() &&
             inference_error(m.model).empty();
}

SampleSizes::~SampleSizes() = default;

std::string SampleSizes::refusal(const std::vector<int64_t>& sample) const {
  const Impl& m = *impl_;
  if (!m.usable) return "";
  detail::pb::ModelProto model = m.model;
  auto* dims = model.mutable_graph()
                   ->mutable_input(m.input)
                   ->mutable_type()
                   ->mutable_tensor_type()
                   ->mutable_shape()
                   ->mutable_dim();
  if (static_cast<size_t>(dims->size()) != sample.size() + 1) return "";
  std::vector<int64_t> want = sample;  // the sample's sizes in the graph input's order
  // perm [0, r-1, 1, ..., r-2]: fed axis j (after the batch) is the graph's axis perm[j + 1].
  if (!m.perm.empty())
    for (size_t j = 0; j < sample.size(); ++j)
      want[static_cast<size_t>(m.perm[j + 1] - 1)] = sample[j];
  bool symbolic = false;
  for (size_t j = 0; j < want.size(); ++j) {
    const auto& d = (*dims)[static_cast<int>(j + 1)];
    if (d.has_dim_value() && d.dim_value() != want[j]) return "";  // fit_input says why
    symbolic = symbolic || !d.has_dim_value();
  }
  // A graph of fixed sizes was exported with a size that runs.
  if (!symbolic) return "";
  for (size_t j = 0; j < want.size(); ++j) (*dims)[static_cast<int>(j + 1)].set_dim_value(want[j]);
  return inference_error(std::move(model));
}

}  // namespace tandem::onnx
