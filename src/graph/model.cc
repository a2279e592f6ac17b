#include "tandem/graph/model.h"

#include <algorithm>
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
  std::map<std::string, std::string> state_owner;  // parameter or buffer name -> layer
  std::map<std::string, std::string> producer{{input, "(graph input)"}};
  for (const auto& l : layers) {
    TANDEM_CHECK(!l.name.empty(), "model '{}' has a layer without a name", name);
    TANDEM_CHECK(names.insert(l.name).second, "model '{}' has two layers named '{}'", name, l.name);
    TANDEM_CHECK(static_cast<bool>(l.forward), "layer '{}' has no forward function", l.name);
    TANDEM_CHECK(!l.outputs.empty(), "layer '{}' produces no tensor", l.name);
    for (const auto& group : {named_parameters(l), named_buffers(l)}) {
      for (const auto& [state, t] : group) {
        auto [it, fresh] = state_owner.emplace(state, l.name);
        TANDEM_CHECK(fresh, "model '{}' has two tensors named '{}': in layer '{}' and in layer '{}'",
                     name, state, it->second, l.name);
      }
    }
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

namespace {

std::vector<int64_t> without_unit_axes(c10::IntArrayRef shape) {
  std::vector<int64_t> out;
  for (int64_t n : shape)
    if (n != 1) out.push_back(n);
  return out;
}

}  // namespace

torch::Tensor fit_input(const Model& model, const torch::Tensor& input) {
  const std::vector<int64_t>& want = model.input_shape;
  if (want.empty() || !input.defined()) return input;
  TANDEM_CHECK(input.dim() >= 1, "model '{}' takes a batch of samples [B,{}], not a scalar",
               model.name, fmt::join(want, ","));
  const c10::IntArrayRef sample = input.sizes().slice(1);
  auto fits = [&](c10::IntArrayRef shape) {
    if (shape.size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i)
      if (want[i] >= 0 && want[i] != shape[i]) return false;
    return true;
  };
  if (fits(sample)) return input;
  const bool fixed = std::all_of(want.begin(), want.end(), [](int64_t n) { return n >= 0; });
  int64_t elements = 1;
  for (int64_t n : want) elements *= n;
  const bool same_elements = fixed && elements == input[0].numel();
  if (same_elements && (want.size() == 1 || without_unit_axes(sample) == without_unit_axes(want))) {
    std::vector<int64_t> shape{input.size(0)};
    shape.insert(shape.end(), want.begin(), want.end());
    return input.reshape(shape);
  }
  TANDEM_CHECK(false,
               "model '{}' takes samples of shape [{}] (-1: any size), but the data gives samples "
               "of shape [{}]{}: give data of that shape, or export the model for it",
               model.name, fmt::join(want, ","), fmt::join(sample, ","),
               same_elements ? " (the same number of elements in another layout, which would "
                               "need a transpose)"
                             : "");
}

}  // namespace tandem::graph
