#include "tandem/runtime/memory_plan.h"

#include <set>

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/memory/context.h"
#include "tandem/memory/cpu_allocator.h"
#include "tandem/memory/tracker.h"

namespace tandem::runtime {
namespace {
// The tracker bucket the measurement charges; no pipeline device uses the last index.
constexpr int kProbeDevice = memory::Tracker::kMaxDevices - 1;

uint64_t tensor_bytes(const torch::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
}
}  // namespace

LayerBytes measure_layer_bytes(const graph::Model& model, const torch::Tensor& micro_input,
                               int optimizer_slots) {
  TANDEM_CHECK(micro_input.defined() && micro_input.device().is_cpu(),
               "measuring memory per layer needs a micro-batch on the CPU");
  TANDEM_CHECK(optimizer_slots >= 0, "optimizer slots {} must be >= 0", optimizer_slots);
  memory::install_cpu_accounting();
  auto& tracker = memory::Tracker::global();
  tracker.register_device(kProbeDevice, "memory probe");
  LayerBytes out;
  out.tensors[model.input] = tensor_bytes(micro_input);
  {
    memory::ScopedWhere where(kProbeDevice, "memory probe");
    std::map<std::string, torch::Tensor> env{{model.input, micro_input}};
    graph::CallContext call;
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const graph::Layer& layer = model.layers[i];
      call.layer = static_cast<int>(i);
      graph::ScopedCall scoped(call);
      memory::ScopedWhere in_layer(layer.name);
      graph::Tensors inputs;
      for (const auto& name : layer.inputs) inputs.push_back(env.at(name));
      const uint64_t before = tracker.current(kProbeDevice);
      graph::Tensors outputs = layer.forward(inputs);
      const uint64_t after = tracker.current(kProbeDevice);
      out.activations.push_back(after > before ? after - before : 0);
      for (size_t k = 0; k < outputs.size(); ++k) {
        out.tensors[layer.outputs[k]] = tensor_bytes(outputs[k]);
        env[layer.outputs[k]] = outputs[k];
      }
      uint64_t params = 0;
      for (const auto& p : graph::named_parameters(layer)) params += tensor_bytes(p.second);
      out.state.push_back(params * static_cast<uint64_t>(2 + optimizer_slots));
    }
  }
  return out;
}

double stage_bytes(const graph::Model& model, const LayerBytes& bytes, int begin, int end,
                   int in_flight, bool recompute) {
  double activations = 0, state = 0;
  for (int i = begin; i < end; ++i) {
    activations += static_cast<double>(bytes.activations[i]);
    state += static_cast<double>(bytes.state[i]);
  }
  if (!recompute) return state + in_flight * activations;
  // Kept per micro-batch in flight: the tensors the stage reads from before it.
  std::set<std::string> produced_inside, inputs;
  for (int i = begin; i < end; ++i) {
    for (const auto& name : model.layers[i].inputs)
      if (!produced_inside.count(name)) inputs.insert(name);
    for (const auto& name : model.layers[i].outputs) produced_inside.insert(name);
  }
  double kept = 0;
  for (const auto& name : inputs) kept += static_cast<double>(bytes.tensors.at(name));
  return state + in_flight * kept + activations;
}

graph::Partition partition_by_memory(const graph::Model& model, const LayerBytes& bytes,
                                     const std::vector<int>& in_flight, bool recompute) {
  TANDEM_CHECK(bytes.activations.size() == model.layers.size() &&
                   bytes.state.size() == model.layers.size(),
               "memory was measured for {} layers but model '{}' has {}", bytes.activations.size(),
               model.name, model.layers.size());
  return graph::partition_by_cost(
      model, static_cast<int>(in_flight.size()), [&](int stage, int begin, int end) {
        return stage_bytes(model, bytes, begin, end, in_flight[stage], recompute);
      });
}

}  // namespace tandem::runtime
