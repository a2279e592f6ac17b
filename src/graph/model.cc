#include "tandem/graph/model.h"

#include <map>
#include <set>

#include "tandem/common/check.h"

namespace tandem::graph {

int Model::find_layer(const std::string& layer_name) const {
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].name == layer_name) return static_cast<int>(i);
  }
  return -1;
}

int64_t Model::parameter_count() const {
  int64_t n = 0;
  for (const auto& l : layers) {
    for (const auto& p : named_parameters(l)) n += p.second.numel();
  }
  return n;
}

Model copy_model(const Model& model) {
  Model copy = model;
  for (auto& layer : copy.layers) layer = copy_layer(layer);
  return copy;
}

void Model::validate() const {
  TANDEM_CHECK(!layers.empty(), "model '{}' has no layers", name);
  TANDEM_CHECK(static_cast<bool>(loss), "model '{}' has no loss function", name);
  std::set<std::string> names;
  std::map<std::string, std::string> producer{{input, "(graph input)"}};
  for (const auto& l : layers) {
    TANDEM_CHECK(!l.name.empty(), "model '{}' has a layer without a name", name);
    TANDEM_CHECK(names.insert(l.name).second, "model '{}' has two layers named '{}'", name, l.name);
    TANDEM_CHECK(static_cast<bool>(l.forward), "layer '{}' has no forward function", l.name);
    TANDEM_CHECK(!l.outputs.empty(), "layer '{}' produces no tensor", l.name);
    for (const auto& t : l.inputs) {
      TANDEM_CHECK(producer.count(t),
                   "layer '{}' consumes tensor '{}', which no earlier layer produces (known "
                   "tensors: {})",
                   l.name, t, [&] {
                     std::vector<std::string> known;
                     for (const auto& kv : producer) known.push_back(kv.first);
                     return fmt::format("{}", fmt::join(known, ", "));
                   }());
    }
    for (const auto& t : l.outputs) {
      auto it = producer.find(t);
      TANDEM_CHECK(it == producer.end(), "tensor '{}' is produced twice: by {} and by layer '{}'",
                   t, it == producer.end() ? "" : it->second, l.name);
      producer[t] = "layer '" + l.name + "'";
    }
  }
  TANDEM_CHECK(producer.count(output), "model '{}': the loss reads tensor '{}', which no layer produces",
               name, output);
}

}  // namespace tandem::graph
