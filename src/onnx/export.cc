#include "tandem/onnx/export.h"

#include <map>
#include <set>

#include "proto.h"
#include "tandem/checkpoint/state_dict.h"
#include "tandem/common/check.h"

namespace tandem::onnx {
namespace {

// The graph as an ONNX runtime predicts with it: dropout off, batch normalization on its
// running statistics (see export_trained).
void to_inference(detail::pb::GraphProto* graph, const std::string& path) {
  std::set<std::string> read;
  for (const auto& node : graph->node())
    for (const auto& name : node.input()) read.insert(name);
  for (const auto& out : graph->output()) read.insert(out.name());
  for (auto& node : *graph->mutable_node()) {
    if (node.op_type() == "Dropout" && node.input_size() > 2) {
      node.mutable_input()->DeleteSubrange(2, node.input_size() - 2);
    } else if (node.op_type() == "BatchNormalization") {
      for (auto& a : *node.mutable_attribute())
        if (a.name() == "training_mode") a.set_i(0);
      for (int k = 1; k < node.output_size(); ++k)
        TANDEM_CHECK(node.output(k).empty() || !read.count(node.output(k)),
                     "'{}': node '{}' ({}) reads the running statistics that BatchNormalization "
                     "'{}' updates in training; export the training graph (--graph training)",
                     path, node.output(k), node.op_type(), node.name());
      if (node.output_size() > 1) node.mutable_output()->DeleteSubrange(1, node.output_size() - 1);
    }
  }
}

}  // namespace

int64_t export_trained(const std::string& onnx_in, const std::string& checkpoint,
                       const std::string& onnx_out, bool inference) {
  detail::pb::ModelProto model = detail::read_model_file(onnx_in);
  const std::map<std::string, torch::Tensor> trained = checkpoint::read_tensors(checkpoint);
  std::map<std::string, detail::pb::TensorProto*> initializers;
  for (auto& t : *model.mutable_graph()->mutable_initializer()) initializers[t.name()] = &t;
  const std::string counter = "num_batches_tracked";
  std::vector<std::string> unknown;
  int64_t replaced = 0;
  for (const auto& [name, value] : trained) {
    auto it = initializers.find(name);
    if (it == initializers.end()) {
      const bool counts = name.size() >= counter.size() &&
                          name.compare(name.size() - counter.size(), counter.size(), counter) == 0;
      if (!counts) unknown.push_back(name);
      continue;
    }
    detail::pb::TensorProto* proto = it->second;
    const std::vector<int64_t> dims(proto->dims().begin(), proto->dims().end());
    TANDEM_CHECK(value.sizes().vec() == dims,
                 "'{}' holds '{}' of shape [{}], but the initializer of that name in '{}' has "
                 "shape [{}]: the checkpoint is of another model",
                 checkpoint, name, fmt::join(value.sizes(), ","), onnx_in, fmt::join(dims, ","));
    detail::set_values(proto, value);
    ++replaced;
  }
  TANDEM_CHECK(unknown.empty(),
               "'{}' holds {} tensor(s) that '{}' has no initializer for ({}{}): the checkpoint "
               "is of another model",
               checkpoint, unknown.size(), onnx_in,
               fmt::join(std::vector<std::string>(unknown.begin(),
                                                  unknown.begin() + std::min<size_t>(5, unknown.size())),
                         ", "),
               unknown.size() > 5 ? ", ..." : "");
  TANDEM_CHECK(replaced > 0, "'{}' holds none of the initializers of '{}'", checkpoint, onnx_in);
  if (inference) to_inference(model.mutable_graph(), onnx_in);
  detail::write_model_file(model, onnx_out);
  return replaced;
}

}  // namespace tandem::onnx
