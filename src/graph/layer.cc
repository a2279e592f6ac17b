#include "tandem/graph/layer.h"

namespace tandem::graph {

Layer make_function_layer(std::string name, ForwardFn fn, std::vector<std::string> inputs,
                          std::vector<std::string> outputs) {
  Layer l;
  l.name = std::move(name);
  l.forward = std::move(fn);
  l.inputs = std::move(inputs);
  l.outputs = std::move(outputs);
  return l;
}

std::vector<std::pair<std::string, torch::Tensor>> named_parameters(const Layer& layer) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  if (!layer.module) return out;
  for (const auto& p : layer.module->named_parameters(/*recurse=*/true)) {
    out.emplace_back(layer.name + "." + p.key(), p.value());
  }
  return out;
}

}  // namespace tandem::graph
