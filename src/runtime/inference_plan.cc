// The memory of a forward alone: measured per layer without autograd, planned per stage.
#include "tandem/runtime/inference_plan.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "memory/cpu_allocator.h"
#include "runtime/probe.h"
#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/precision.h"
#include "tandem/memory/context.h"
#include "tandem/memory/tracker.h"

namespace tandem::runtime {
InferenceBytes measure_inference_bytes(const graph::Model& model, const torch::Tensor& input,
                                       spatial::Group* group, int64_t workspace_bound,
                                       c10::ScalarType precision) {
  TANDEM_CHECK(input.defined() && input.device().is_cpu(),
               "measuring a forward's memory needs a batch on the CPU");
  memory::install_cpu_accounting();
  auto& tracker = memory::Tracker::global();
  tracker.register_device(kProbeDevice, "memory probe");
  torch::NoGradGuard no_grad;
  InferenceBytes out;
  out.tensors[model.input] = tensor_bytes(input);
  std::map<std::string, size_t> last_read;
  for (size_t i = 0; i < model.layers.size(); ++i)
    for (const auto& name : model.layers[i].inputs) last_read[name] = i;
  memory::ScopedWhere where(kProbeDevice, "memory probe");
  std::map<std::string, torch::Tensor> env{{model.input, input}};
  graph::CallContext call;
  call.group = group;
  call.workspace_bound = workspace_bound;
  call.precision = precision;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const graph::Layer& layer = model.layers[i];
    call.layer = static_cast<int>(i);
    graph::ScopedCall scoped(call);
    memory::ScopedWhere in_layer(layer.name);
    graph::Tensors inputs;
    for (const auto& name : layer.inputs) inputs.push_back(env.at(name));
    const uint64_t before = tracker.current(kProbeDevice);
    const int64_t halo_before = group ? group->halo_bytes() : 0;
    tracker.reset_peak(kProbeDevice);
    graph::Tensors outputs = graph::forward_in_precision(layer, inputs);
    out.held.push_back(tracker.peak(kProbeDevice) - before);
    out.halo.push_back(group ? static_cast<uint64_t>(group->halo_bytes() - halo_before) : 0);
    for (size_t k = 0; k < outputs.size(); ++k) {
      out.tensors[layer.outputs[k]] = tensor_bytes(outputs[k]);
      if (last_read.count(layer.outputs[k])) env[layer.outputs[k]] = outputs[k];
    }
    inputs.clear();
    for (const auto& name : layer.inputs)
      if (last_read.at(name) == i) env.erase(name);
    uint64_t params = 0;
    for (const auto& p : graph::named_parameters(layer)) params += tensor_bytes(p.second);
    out.parameters.push_back(params);
  }
  return out;
}

std::vector<double> inference_peaks(const graph::Model& model, const InferenceBytes& bytes,
                                    const graph::Partition& partition) {
  TANDEM_CHECK(
      bytes.held.size() == model.layers.size() && bytes.parameters.size() == model.layers.size(),
      "a forward measured over {} layers for a model of {}", bytes.held.size(),
      model.layers.size());
  // Per tensor: the last layer that reads it (-1: none).
  std::map<std::string, int> last_read;
  for (size_t i = 0; i < model.layers.size(); ++i)
    for (const auto& name : model.layers[i].inputs) last_read[name] = static_cast<int>(i);
  auto size = [&](const std::string& name) {
    const auto it = bytes.tensors.find(name);
    return it == bytes.tensors.end() ? 0.0 : static_cast<double>(it->second);
  };
  std::vector<double> peaks;
  for (int s = 0; s < partition.num_stages; ++s) {
    const auto [begin, end] = partition.layers_of(s);
    double parameters = 0;
    std::set<std::string> made;
    for (int i = begin; i < end; ++i) {
      parameters += static_cast<double>(bytes.parameters[static_cast<size_t>(i)]);
      for (const auto& name : model.layers[static_cast<size_t>(i)].outputs) made.insert(name);
    }
    // Alive before the stage's first layer and until its forward ends: what it receives (the
    // executor keeps a micro-batch's inputs with its state).
    std::map<std::string, double> alive;
    std::set<std::string> received;
    for (int i = begin; i < end; ++i)
      for (const auto& name : model.layers[static_cast<size_t>(i)].inputs)
        if (!made.count(name)) {
          alive[name] = size(name);
          received.insert(name);
        }
    double peak = 0, sent = 0;  // sent: the planes of the stage's last exchange
    for (int i = begin; i < end; ++i) {
      double in_use = 0;
      for (const auto& [name, b] : alive) in_use += b;
      const auto halo = static_cast<double>(bytes.halo[static_cast<size_t>(i)]);
      // A layer that exchanges none may run while a neighbour has yet to take the planes sent at
      // the last exchange (as many as were received there, or fewer at the volume's ends).
      const double pending = halo > 0 ? 0 : sent;
      peak = std::max(peak,
                      in_use + static_cast<double>(bytes.held[static_cast<size_t>(i)]) + pending);
      if (halo > 0) sent = halo;
      const graph::Layer& layer = model.layers[static_cast<size_t>(i)];
      for (const auto& name : layer.outputs)
        if (last_read.count(name) || name == model.output) alive[name] = size(name);
      // Gone after their last reader here, unless a later stage reads them (sent).
      for (auto it = alive.begin(); it != alive.end();) {
        const auto r = last_read.find(it->first);
        const bool later = it->first == model.output || (r != last_read.end() && r->second >= end);
        const bool needed =
            later || received.count(it->first) || (r != last_read.end() && r->second > i);
        it = needed ? std::next(it) : alive.erase(it);
      }
    }
    peaks.push_back(parameters + peak);
  }
  return peaks;
}

std::string to_json(const InferenceBytes& bytes) {
  nlohmann::json j;
  j["held"] = bytes.held;
  j["parameters"] = bytes.parameters;
  j["halo"] = bytes.halo;
  j["tensors"] = bytes.tensors;
  return j.dump();
}

InferenceBytes inference_bytes_from_json(const std::string& text) {
  InferenceBytes out;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    j.at("held").get_to(out.held);
    j.at("parameters").get_to(out.parameters);
    j.at("halo").get_to(out.halo);
    j.at("tensors").get_to(out.tensors);
  } catch (const nlohmann::json::exception& e) {
    TANDEM_CHECK(false, "not a measurement of a forward's memory: {}", e.what());
  }
  TANDEM_CHECK(out.held.size() == out.parameters.size() && out.held.size() == out.halo.size(),
               "not a measurement of a forward's memory: {} layers held, {} with parameters, {} "
               "with halos",
               out.held.size(), out.parameters.size(), out.halo.size());
  return out;
}

}  // namespace tandem::runtime
