// Measuring a model's layers for the memory plan (memory_plan.h): the bytes each layer's
// forward leaves alive for its backward, its passing workspace, its state, and every named
// tensor's size, on one micro-batch charged to a probe bucket of the memory tracker.
#include <torch/autograd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "memory/cpu_allocator.h"
#include "runtime/probe.h"
#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/deferred.h"
#include "tandem/graph/precision.h"
#include "tandem/memory/context.h"
#include "tandem/memory/tracker.h"
#include "tandem/runtime/memory_plan.h"
#include "tandem/spatial/group.h"

namespace tandem::runtime {
namespace {
// Stands for the gradient that reaches one of a layer's outputs in a pipeline's backward: the
// node before it makes it (here: this function's backward), and the engine frees it once the
// layer's first node has used it. A seed the measurement made itself would stay alive for the
// whole backward.
class FreshGrad : public torch::autograd::Function<FreshGrad> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& y) {
    return y.clone();
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext*,
                                               torch::autograd::tensor_list grads) {
    return {torch::ones_like(grads[0], at::MemoryFormat::Contiguous)};
  }
};

// How a layer's backward meets its outputs.
enum class Outputs {
  // Held only by what the layer's autograd graph saves (a ReLU's output goes once the ReLU's
  // backward has run), the gradients that reach them made as the backward starts and freed
  // once used, as in a pipeline's backward inside a stage.
  kReleased,
  // Kept throughout, with the gradients that reach them: a stage that sends its outputs keeps
  // them until its backward ends, and the gradient messages for them are counted apart.
  kKept,
  // Kept throughout, the gradients that reach them made and freed as with kReleased: in the
  // input half of a split backward, a later layer's deferred work keeps its input.
  kKeptAlive,
};

// The most bytes a backward of `layer` alone holds above what is in use when it starts: it runs
// the layer again on copies of `inputs` cut from the graph and asks for the gradients of its
// parameters and of the inputs in `needs_grad` (the model's own input needs none), without
// accumulating them into the parameters.
// What a layer's backward is run on alone: `inputs` cut from the graph (copies of their own
// where `copy`), those in `needs_grad` asking for a gradient, and the tensors to ask gradients
// for: those inputs and the layer's parameters.
struct Leaves {
  graph::Tensors inputs;
  std::vector<torch::Tensor> wrt;
};
Leaves leaves_of(const graph::Layer& layer, const graph::Tensors& inputs,
                 const std::vector<bool>& needs_grad, bool copy) {
  Leaves l;
  for (size_t k = 0; k < inputs.size(); ++k) {
    torch::Tensor d = copy ? inputs[k].detach().clone() : inputs[k].detach();
    if (d.is_floating_point() && needs_grad[k]) {
      d.requires_grad_(true);
      l.wrt.push_back(d);
    }
    l.inputs.push_back(d);
  }
  for (const auto& p : graph::named_parameters(layer))
    if (p.second.requires_grad()) l.wrt.push_back(p.second);
  return l;
}

// `split`: the input half of a split backward instead (schedules with I and W actions), under
// `call` with a queue for the weight work, which is dropped unrun.
uint64_t backward_workspace(const graph::Layer& layer, const graph::Tensors& inputs,
                            const std::vector<bool>& needs_grad, Outputs outputs_are,
                            bool split = false, graph::CallContext call = {}) {
  auto& tracker = memory::Tracker::global();
  graph::DeferredWeightGrads queue;
  call.deferred = &queue;
  std::optional<graph::ScopedCall> deferring;
  if (split) deferring.emplace(call);
  const Leaves leaves = leaves_of(layer, inputs, needs_grad, /*copy=*/false);
  const std::vector<torch::Tensor>& wrt = leaves.wrt;
  graph::Tensors outputs = graph::forward_in_precision(layer, leaves.inputs);
  std::vector<torch::Tensor> roots, seeds;
  for (const auto& y : outputs) {
    if (!y.requires_grad()) continue;
    if (outputs_are != Outputs::kKept) {
      roots.push_back(FreshGrad::apply(y));
      seeds.push_back(torch::ones({1}, y.options()).expand(y.sizes()));  // holds no bytes
    } else {
      roots.push_back(y);
      seeds.push_back(torch::ones_like(y));
    }
  }
  if (outputs_are == Outputs::kReleased) outputs.clear();
  if (roots.empty() || wrt.empty()) return 0;
  const uint64_t start = tracker.current(kProbeDevice);
  tracker.reset_peak(kProbeDevice);
  queue.set_deferring(split);
  torch::autograd::grad(roots, wrt, seeds, /*retain_graph=*/false, /*create_graph=*/false,
                        /*allow_unused=*/true);
  queue.set_deferring(false);
  const uint64_t peak = tracker.peak(kProbeDevice);
  return peak > start ? peak - start : 0;
}

// What `layer` holds between the halves of a split backward and above that while its W work
// runs. It runs the layer again, under `call` with a deferred queue, on copies of `inputs` (the
// stage frees its own after the input half, unless the deferred work keeps them) with fresh
// gradients for its outputs, runs the input half, drops every handle of its own, and counts
// what the queued work still holds. Then it runs that work as a W action does (each piece freed
// once done) and counts the most it holds above that; the parameters' gradients are set aside
// meanwhile and put back.
struct Deferred {
  uint64_t held = 0;       // LayerBytes::deferred
  uint64_t workspace = 0;  // LayerBytes::weight_workspace
};
Deferred deferred_bytes(const graph::Layer& layer, const graph::Tensors& inputs,
                        const std::vector<bool>& needs_grad, graph::CallContext call) {
  auto& tracker = memory::Tracker::global();
  graph::DeferredWeightGrads queue;
  call.deferred = &queue;
  graph::ScopedCall scoped(call);
  const uint64_t start = tracker.current(kProbeDevice);
  {
    Leaves copies = leaves_of(layer, inputs, needs_grad, /*copy=*/true);
    std::vector<torch::Tensor> wrt = std::move(copies.wrt);
    graph::Tensors outputs = graph::forward_in_precision(layer, copies.inputs);
    std::vector<torch::Tensor> roots, seeds;
    for (const auto& y : outputs) {
      if (!y.requires_grad()) continue;
      roots.push_back(y);
      seeds.push_back(torch::ones_like(y));
    }
    outputs.clear();
    copies.inputs.clear();
    if (roots.empty() || wrt.empty()) return {};
    queue.set_deferring(true);
    torch::autograd::grad(roots, wrt, seeds, /*retain_graph=*/false, /*create_graph=*/false,
                          /*allow_unused=*/true);
    queue.set_deferring(false);
  }
  const uint64_t held = tracker.current(kProbeDevice);
  if (queue.size() == 0 || held <= start) return {};
  std::vector<std::pair<torch::Tensor, torch::Tensor>> grads;
  for (const auto& p : graph::named_parameters(layer)) {
    grads.emplace_back(p.second, p.second.grad());
    p.second.mutable_grad() = torch::Tensor();
  }
  tracker.reset_peak(kProbeDevice);
  queue.run_all();
  const uint64_t peak = tracker.peak(kProbeDevice);
  for (auto& [param, grad] : grads) param.mutable_grad() = grad;
  return {held - start, peak > held ? peak - held : 0};
}

}  // namespace

LayerBytes measure_layer_bytes(const graph::Model& model, const torch::Tensor& micro_input,
                               int optimizer_slots, spatial::Group* group, int step_temporaries,
                               int64_t workspace_bound, c10::ScalarType precision) {
  TANDEM_CHECK(micro_input.defined() && micro_input.device().is_cpu(),
               "measuring memory per layer needs a micro-batch on the CPU");
  TANDEM_CHECK(optimizer_slots >= 0, "optimizer slots {} must be >= 0", optimizer_slots);
  TANDEM_CHECK(step_temporaries >= 0, "optimizer step temporaries {} must be >= 0",
               step_temporaries);
  memory::install_cpu_accounting();
  auto& tracker = memory::Tracker::global();
  tracker.register_device(kProbeDevice, "memory probe");
  LayerBytes out;
  out.tensors[model.input] = tensor_bytes(micro_input);
  // The last layer that reads each tensor: after it, the tensor is dropped.
  std::map<std::string, size_t> last_read;
  for (size_t i = 0; i < model.layers.size(); ++i)
    for (const auto& name : model.layers[i].inputs) last_read[name] = i;
  // Whether an autograd graph keeps each tensor for the backward: its producer's (a ReLU keeps
  // its result) or a reader's (a convolution keeps its input). A tensor none keeps is gone
  // once its last reader has run (the transposed convolution's output that the U-Net's next
  // layer concatenates: the copy is kept, not it), so it is no activation of its producer.
  // Judged by who else holds the tensor or its storage besides the measurement's own handles;
  // anything else that shares them (a view, the graph input) counts as kept.
  std::map<std::string, bool> kept;
  // Per layer: the most its forward held above what was in use before it; its backward's
  // workspace with its outputs released and with them kept (backward_workspace).
  std::vector<uint64_t> forward_peak, backward_released, backward_kept;
  std::vector<uint64_t> input_released, input_kept;  // the same for the I half of a split backward
  auto held_beyond = [](const torch::Tensor& t, size_t impl_refs) {
    if (!t.has_storage() || t.use_count() > impl_refs) return true;
    // A view made inside the layer (an ONNX InstanceNormalization's reshape of its result)
    // holds its base, which shares the storage: held beyond them when the base has another
    // holder, or the storage another tensor.
    if (t.is_view()) return t._base().use_count() > 1 || t.storage().use_count() > 2;
    return t.storage().use_count() > 1;
  };
  {
    memory::ScopedWhere where(kProbeDevice, "memory probe");
    // Tensors later layers read, cut from the graph: a layer's saved tensors are freed once it
    // is measured, so the measurement holds the live tensors and one layer, not a whole
    // forward (what the layer leaves alive does not depend on whether its inputs are leaves).
    std::map<std::string, torch::Tensor> env{{model.input, micro_input}};
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
      const uint64_t after = tracker.current(kProbeDevice);
      out.halo.push_back(group ? static_cast<uint64_t>(group->halo_bytes() - halo_before) : 0);
      out.activations.push_back(after > before ? after - before : 0);
      forward_peak.push_back(tracker.peak(kProbeDevice) - before);
      std::vector<bool> needs_grad;
      for (const auto& name : layer.inputs) needs_grad.push_back(name != model.input);
      backward_released.push_back(
          backward_workspace(layer, inputs, needs_grad, Outputs::kReleased));
      backward_kept.push_back(backward_workspace(layer, inputs, needs_grad, Outputs::kKept));
      const Deferred deferred = deferred_bytes(layer, inputs, needs_grad, call);
      out.deferred.push_back(deferred.held);
      out.weight_workspace.push_back(deferred.workspace);
      // The input half (a layer that defers nothing runs its whole backward there). Its outputs
      // stay alive there where a later layer's deferred work reads them: counted so for every
      // layer, a bound from above where none does.
      input_released.push_back(backward_workspace(layer, inputs, needs_grad, Outputs::kKeptAlive,
                                                  deferred.held > 0, call));
      input_kept.push_back(deferred.held > 0 ? backward_workspace(layer, inputs, needs_grad,
                                                                  Outputs::kKept, true, call)
                                             : backward_kept.back());
      for (size_t k = 0; k < outputs.size(); ++k) {
        out.tensors[layer.outputs[k]] = tensor_bytes(outputs[k]);
        if (layer.outputs[k] == model.output)
          out.loss_input = static_cast<uint64_t>(outputs[k].numel()) * sizeof(float);
        kept[layer.outputs[k]] = held_beyond(outputs[k], 1);
        if (!last_read.count(layer.outputs[k])) continue;
        env[layer.outputs[k]] = outputs[k].detach().requires_grad_(outputs[k].requires_grad());
      }
      // Held here by env, by `inputs` (once per reading) and, for a leaf that requires its
      // gradient, by its gradient accumulator in this layer's graph (which in a pipeline is the
      // producer's node instead); more: this layer's graph keeps it.
      for (const auto& name : layer.inputs) {
        const torch::Tensor& t = env.at(name);
        const auto readings = std::count(layer.inputs.begin(), layer.inputs.end(), name);
        const bool accumulator = torch::autograd::impl::try_get_grad_accumulator(t) != nullptr;
        if (name != model.input &&
            held_beyond(t, 1 + static_cast<size_t>(readings) + (accumulator ? 1 : 0)))
          kept[name] = true;
      }
      inputs.clear();
      for (const auto& name : layer.inputs)
        if (last_read.at(name) == i) env.erase(name);
      uint64_t params = 0, largest = 0;
      for (const auto& p : graph::named_parameters(layer)) {
        params += tensor_bytes(p.second);
        largest = std::max(largest, tensor_bytes(p.second));
      }
      out.state.push_back(params * static_cast<uint64_t>(2 + optimizer_slots));
      out.step.push_back(largest * static_cast<uint64_t>(step_temporaries));
    }
  }
  for (size_t i = 0; i < model.layers.size(); ++i) {
    // Outputs no graph keeps are no activations: gone after their last reader. They count in
    // the forward's workspace, and in the backward where the stage keeps them (sent on).
    uint64_t unkept = 0;
    for (const auto& name : model.layers[i].outputs) {
      if (name == model.output || !last_read.count(name) || kept.at(name)) continue;
      out.activations[i] -= std::min(out.activations[i], out.tensors.at(name));
      unkept += out.tensors.at(name);
      out.unkept.push_back(name);
    }
    out.forward.push_back(
        forward_peak[i] > out.activations[i] ? forward_peak[i] - out.activations[i] : 0);
    out.backward.push_back(backward_released[i]);
    out.backward_held.push_back(backward_kept[i] + unkept);
    out.input_backward.push_back(input_released[i]);
    out.input_backward_held.push_back(input_kept[i] + unkept);
    out.transient.push_back(std::max(out.forward[i], out.backward[i]));
  }
  return out;
}

std::string to_json(const LayerBytes& bytes) {
  nlohmann::json j;
  j["activations"] = bytes.activations;
  j["transient"] = bytes.transient;
  j["forward"] = bytes.forward;
  j["backward"] = bytes.backward;
  j["backward_held"] = bytes.backward_held;
  j["halo"] = bytes.halo;
  j["deferred"] = bytes.deferred;
  j["weight_workspace"] = bytes.weight_workspace;
  j["input_backward"] = bytes.input_backward;
  j["input_backward_held"] = bytes.input_backward_held;
  j["state"] = bytes.state;
  j["step"] = bytes.step;
  j["tensors"] = bytes.tensors;
  j["unkept"] = bytes.unkept;
  j["loss_input"] = bytes.loss_input;
  j["target"] = bytes.target;
  return j.dump();
}

LayerBytes layer_bytes_from_json(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    LayerBytes out;
    j.at("activations").get_to(out.activations);
    j.at("transient").get_to(out.transient);
    j.at("forward").get_to(out.forward);
    j.at("backward").get_to(out.backward);
    j.at("backward_held").get_to(out.backward_held);
    j.at("halo").get_to(out.halo);
    if (j.contains("deferred")) j.at("deferred").get_to(out.deferred);
    if (j.contains("weight_workspace")) j.at("weight_workspace").get_to(out.weight_workspace);
    if (j.contains("input_backward")) j.at("input_backward").get_to(out.input_backward);
    if (j.contains("input_backward_held"))
      j.at("input_backward_held").get_to(out.input_backward_held);
    j.at("state").get_to(out.state);
    j.at("step").get_to(out.step);
    j.at("tensors").get_to(out.tensors);
    if (j.contains("unkept")) j.at("unkept").get_to(out.unkept);
    if (j.contains("loss_input")) j.at("loss_input").get_to(out.loss_input);
    if (j.contains("target")) j.at("target").get_to(out.target);
    const size_t n = out.activations.size();
    TANDEM_CHECK(out.transient.size() == n && out.forward.size() == n && out.backward.size() == n &&
                     out.backward_held.size() == n && out.halo.size() == n &&
                     out.state.size() == n && (out.step.empty() || out.step.size() == n) &&
                     (out.deferred.empty() || out.deferred.size() == n) &&
                     (out.weight_workspace.empty() || out.weight_workspace.size() == n) &&
                     (out.input_backward.empty() || out.input_backward.size() == n) &&
                     (out.input_backward_held.empty() || out.input_backward_held.size() == n),
                 "a layer memory measurement has {} activations but {}, {}, {} and {} "
                 "workspaces, {} halos, {} states and {} optimizer steps",
                 n, out.transient.size(), out.forward.size(), out.backward.size(),
                 out.backward_held.size(), out.halo.size(), out.state.size(), out.step.size());
    return out;
  } catch (const nlohmann::json::exception& e) {
    TANDEM_CHECK(false, "not a layer memory measurement: {}", e.what());
  }
}

}  // namespace tandem::runtime
