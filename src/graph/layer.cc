#include "tandem/graph/layer.h"

#include "tandem/common/check.h"

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

Layer copy_layer(const Layer& layer) {
  Layer copy = layer;
  if (!layer.module) return copy;
  TANDEM_CHECK(static_cast<bool>(layer.bind),
               "layer '{}' holds parameters but cannot be copied for another device: build it with "
               "graph::make_layer, or set Layer::bind to make its forward over a copy of its module",
               layer.name);
  try {
    copy.module = layer.module->clone();
  } catch (const c10::Error& e) {
    TANDEM_CHECK(false,
                 "layer '{}': its module cannot be copied for another device ({}); derive it from "
                 "torch::nn::Cloneable",
                 layer.name, e.what_without_backtrace());
  }
  copy.forward = layer.bind(copy.module);
  return copy;
}

std::string state_name(const Layer& layer, const std::string& key) {
  auto it = layer.state_names.find(key);
  return it != layer.state_names.end() ? it->second : layer.name + "." + key;
}

std::vector<std::pair<std::string, torch::Tensor>> named_parameters(const Layer& layer) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  if (!layer.module) return out;
  for (const auto& p : layer.module->named_parameters(/*recurse=*/true)) {
    out.emplace_back(state_name(layer, p.key()), p.value());
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> named_buffers(const Layer& layer) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  if (!layer.module) return out;
  for (const auto& b : layer.module->named_buffers(/*recurse=*/true)) {
    out.emplace_back(state_name(layer, b.key()), b.value());
  }
  return out;
}

}  // namespace tandem::graph
