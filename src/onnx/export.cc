#include "tandem/onnx/export.h"

#include <map>

#include "proto.h"
#include "tandem/checkpoint/state_dict.h"
#include "tandem/common/check.h"

namespace tandem::onnx {

int64_t export_trained(const std::string& onnx_in, const std::string& checkpoint,
                       const std::string& onnx_out) {
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
  detail::write_model_file(model, onnx_out);
  return replaced;
}

}  // namespace tandem::onnx
