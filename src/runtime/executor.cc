#include "executor.h"

#include <torch/autograd.h>
#include <torch/version.h>

#include <algorithm>

#include "tandem/graph/call_context.h"
#include "tandem/graph/precision.h"
#include "tandem/memory/context.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::runtime {

using schedule::Action;
using schedule::Kind;
using schedule::Op;

namespace {
double since_us(TimePoint origin) {
  return std::chrono::duration<double, std::micro>(Clock::now() - origin).count();
}

const char* phase_name(const Action& a) {
  if (a.kind != Kind::kCompute) return "transfer";
  switch (a.op) {
    case Op::kForward:
      return "forward";
    case Op::kBackward:
      return "backward";
    case Op::kInput:
      return "backward (input gradient)";
    case Op::kWeight:
      return "backward (weight gradient)";
  }
  return "?";
}
}  // namespace

int Executor::global_device(int stage) const {
  return plan_->replica * plan_->pipeline_size + (*plan_->stage_device)[stage] * plan_->slabs +
         slab_;
}

bool Executor::is_local(int stage) const { return (*plan_->stage_device)[stage] == group_; }

transport::MessageKey Executor::key(const std::string& tensor, int mb, bool grad, int from,
                                    int to) const {
  return transport::MessageKey{tensor,    static_cast<int>(plan_->step), mb, grad, from, to,
                               plan_->run};
}

DeviceResult Executor::run(const StepPlan& plan) {
  plan_ = &plan;
  state_.clear();
  deferred_.clear();
  inflight_.clear();
  result_ = DeviceResult{};
  memory::ScopedWhere where_device(device_, context_.spec().name);
  if (spatial::Group* g = group()) g->begin_run(plan.step, plan.run, plan.origin);
  for (const Action& a : plan.lowered->device_actions[group_]) {
    const double start = since_us(plan.origin);
    bool out_of_memory = false;
    std::string what;
    try {
      memory::ScopedWhere where_action(a.stage, phase_name(a), a.microbatch);
      execute(a);
      result_.timings.push_back({device_, a, start, since_us(plan.origin)});
      continue;
    } catch (const transport::Aborted&) {
      throw;  // another device failed first; its error is the one reported
    } catch (const memory::OutOfMemory& e) {
      out_of_memory = true;
      what = e.what();
#if TORCH_VERSION_MAJOR >= 2
    } catch (const c10::OutOfMemoryError& e) {
      // The CUDA caching allocator's own error (its cap is --device-memory on CUDA).
      out_of_memory = true;
      what =
          fmt::format("{} is out of memory: {}", context_.spec().name, e.what_without_backtrace());
#endif
    } catch (const c10::Error& e) {
      what = e.what_without_backtrace();  // LibTorch's own errors: its message, not its stack
    } catch (const std::exception& e) {
      what = e.what();
    }
    std::string msg = fmt::format(
        "step {} failed on device {} ({}), stage {}, action {} (micro-batch {}): {}\n{}", plan.step,
        device_, context_.spec().name, a.stage, schedule::to_string(a), a.microbatch, what,
        schedule::format_grid(*plan.lowered, &a));
    plan.transport->abort(msg);
    throw StepError(msg, device_, a.stage, schedule::to_string(a), a.microbatch, out_of_memory);
  }
  if (plan.training) {
    TANDEM_ASSERT(deferred_.empty(), "device {} ends the step with {} W actions not run", device_,
                  deferred_.size());
    TANDEM_ASSERT(state_.empty(), "device {} ends the step holding {} micro-batch states", device_,
                  state_.size());
  }
  state_.clear();
  if (const spatial::Group* g = group()) result_.exchanges = g->exchanges();
  return std::move(result_);
}

void Executor::execute(const Action& a) {
  switch (a.kind) {
    case Kind::kCompute: {
      // Computing: this device's cores, and those of devices waiting now.
      CoreShare::Busy busy(context_.is_cpu() ? plan_->cores : nullptr, device_);
      switch (a.op) {
        case Op::kForward:
          return forward(a.stage, a.microbatch);
        case Op::kBackward:
          return backward(a.stage, a.microbatch, /*input_only=*/false);
        case Op::kInput:
          return backward(a.stage, a.microbatch, /*input_only=*/true);
        case Op::kWeight:
          return weight_gradients(a.stage, a.microbatch);
      }
      return;
    }
    case Kind::kSend:
      if (a.op == Op::kForward) return send_forward(a.stage, a.microbatch, a.peer);
      return send_backward(a.stage, a.microbatch, a.peer);
    case Kind::kRecv:
      if (a.op == Op::kForward) return recv_forward(a.stage, a.microbatch, a.peer);
      return recv_backward(a.stage, a.microbatch, a.peer);
  }
}

void Executor::recv_forward(int stage, int mb, int from) {
  MicrobatchState& st = state_[{stage, mb}];
  for (const auto& c : plan_->flow->inputs[stage]) {
    if (c.from_stage != from) continue;
    torch::Tensor t =
        plan_->transport->recv(global_device(stage), global_device(from),
                               key(c.tensor, mb, false, from, stage), context_.spec().device);
    // Senders send floating tensors only (send_forward): anything else was corrupted on its way,
    // and would otherwise fail in LibTorch's words when it becomes a leaf of the backward.
    TANDEM_CHECK(t.is_floating_point(),
                 "the activation '{}' from stage {} arrived with dtype {}, but only floating "
                 "tensors are sent: the message was corrupted on its way",
                 c.tensor, from, c10::toString(t.scalar_type()));
    st.inputs[c.tensor] = plan_->training ? t.requires_grad_(true) : t;
  }
}

void Executor::forward(int stage, int mb) {
  MicrobatchState& st = state_[{stage, mb}];
  const auto [offset, size] = plan_->slices[mb];
  const bool loss_stage = stage == plan_->flow->loss_stage;
  for (const auto& c : plan_->flow->inputs[stage]) {
    if (c.from_stage < 0) {
      st.inputs[c.tensor] =
          context_.copy_in(slab_of(plan_->input.narrow(0, offset, size)), nullptr);
    } else {
      TANDEM_ASSERT(st.inputs.count(c.tensor), "stage {} mb {} misses input '{}' from stage {}",
                    stage, mb, c.tensor, c.from_stage);
    }
  }
  if (loss_stage && !plan_->predicting)
    st.target = context_.copy_in(slab_of(plan_->target.narrow(0, offset, size)), nullptr);

  if (plan_->training && plan_->split_backward) {
    deferred_[{stage, mb}] = std::make_unique<graph::DeferredWeightGrads>();
  }
  // With recomputation the forward runs without autograd; the backward runs it again.
  const bool keep_graph = plan_->training && !plan_->recompute;
  {
    torch::AutoGradMode grad_mode(keep_graph);
    run_layers(stage, mb, st, /*first_pass=*/true);
  }
  st.ready = context_.record_ready();
  if (plan_->training) {
    int& n = inflight_[stage];
    ++n;
    result_.peak_inflight[stage] = std::max(result_.peak_inflight[stage], n);
  }
  // Consumers on this device get their inputs directly (same memory: no copy needed).
  for (const auto& c : plan_->flow->outputs[stage]) {
    if (!is_local(c.to_stage)) continue;
    torch::Tensor leaf = st.outputs.at(c.tensor).detach();
    state_[{c.to_stage, mb}].inputs[c.tensor] = plan_->training ? leaf.requires_grad_(true) : leaf;
  }
  if (plan_->training && plan_->recompute) {
    // The backward runs the forward again: keep the outputs only until they are sent.
    for (const auto& c : plan_->flow->outputs[stage]) st.pending_sends += !is_local(c.to_stage);
    if (st.pending_sends == 0) st.outputs.clear();
  }
  if (!plan_->training) {
    // Forward only: keep the outputs until their last send (see send_forward).
    st.inputs.clear();
    st.target = torch::Tensor();
    for (const auto& c : plan_->flow->outputs[stage]) st.pending_sends += !is_local(c.to_stage);
    if (st.pending_sends == 0) state_.erase({stage, mb});
  }
}

torch::Tensor Executor::slab_of(const torch::Tensor& t) const {
  if (plan_->slabs == 1) return t;
  const spatial::Slab& s = plan_->layout->slabs[slab_];
  return t.narrow(plan_->layout->dim, s.offset, s.size);
}

graph::CallContext Executor::call_context(int stage, int mb, int layer, bool first_pass) const {
  graph::CallContext ctx;
  ctx.seed = plan_->seed;
  ctx.step = plan_->step;
  ctx.microbatch = mb;
  ctx.layer = layer;
  ctx.training = plan_->training;
  ctx.sample_offset = plan_->first_sample + plan_->slices[mb].first;
  ctx.stage = stage;
  ctx.recomputing = !first_pass;
  ctx.group = group();
  ctx.microbatches = static_cast<int>(plan_->slices.size());
  ctx.workspace_bound = plan_->workspace_bound;
  ctx.precision = plan_->precision;
  return ctx;
}

void Executor::run_layers(int stage, int mb, MicrobatchState& st, bool first_pass) {
  const auto& model = this->model();
  const auto [begin, end] = plan_->partition->layers_of(stage);
  std::map<std::string, torch::Tensor> env = st.inputs;
  // Each tensor is dropped after the stage's last layer that reads it, unless the stage sends it
  // or the loss reads it: what autograd keeps for the backward stays with autograd, and the
  // rest (a convolution's output that a separate ReLU replaced, in an ONNX graph) is freed as
  // the memory plan counts it (runtime/memory_plan.h).
  std::map<std::string, int> last_read;
  for (int i = begin; i < end; ++i)
    for (const auto& name : model.layers[i].inputs) last_read[name] = i;
  for (const auto& c : plan_->flow->outputs[stage]) last_read[c.tensor] = end;
  if (stage == plan_->flow->loss_stage) last_read[model.output] = end;
  for (int i = begin; i < end; ++i) {
    const auto& layer = model.layers[i];
    graph::Tensors in;
    in.reserve(layer.inputs.size());
    for (const auto& name : layer.inputs) in.push_back(env.at(name));
    auto deferred = deferred_.find({stage, mb});
    graph::CallContext ctx = call_context(stage, mb, i, first_pass);
    ctx.deferred = deferred == deferred_.end() ? nullptr : deferred->second.get();
    graph::ScopedCall call(ctx);
    memory::ScopedWhere where_layer(layer.name);
    graph::Tensors out = graph::forward_in_precision(layer, in);
    TANDEM_CHECK(out.size() == layer.outputs.size(), "layer '{}' returned {} tensors but names {}",
                 layer.name, out.size(), layer.outputs.size());
    if (plan_->placement_log) {
      // On a GPU the output's own device is the evidence; CPU tensors do not say which of this
      // process's CPU devices made them, the worker does.
      const bool gpu = !out.empty() && out.front().defined() && out.front().is_cuda();
      plan_->placement_log->record_forward(i,
                                           gpu ? out.front().device().str() : context_.spec().name);
      for (auto& t : out) t = plan_->placement_log->probe(t, i);
    }
    in.clear();
    for (const auto& name : layer.inputs)
      if (last_read.at(name) == i) env.erase(name);
    for (size_t k = 0; k < out.size(); ++k) {
      // An output nothing reads (an ONNX node's second output) is not kept either.
      if (last_read.count(layer.outputs[k])) env[layer.outputs[k]] = std::move(out[k]);
    }
  }
  {
    for (const auto& c : plan_->flow->outputs[stage]) {
      const torch::Tensor& t = env.at(c.tensor);
      TANDEM_CHECK(t.is_floating_point(),
                   "tensor '{}' crosses from stage {} to stage {} but has dtype {}; only floating "
                   "point tensors may cross stages",
                   c.tensor, stage, c.to_stage, std::string(t.dtype().name()));
      st.outputs[c.tensor] = t;
    }
  }
  if (stage == plan_->flow->loss_stage && plan_->predicting) {
    result_.outputs[mb] =
        graph::reduced_to(env.at(model.output).detach(), torch::kFloat).to(torch::kCPU);
  } else if (stage == plan_->flow->loss_stage) {
    // The loss and the metric in fp32 whatever the forward's precision (a differentiable cast).
    const torch::Tensor output = graph::reduced_to(env.at(model.output), torch::kFloat);
    // The loss and the metric are one more call: on slabs they sum over the whole sample with
    // the group (spatial/group_sum.h), and every slab computes the same value.
    graph::ScopedCall call(
        call_context(stage, mb, static_cast<int>(model.layers.size()), first_pass));
    memory::ScopedWhere where_loss("loss");
    torch::Tensor loss = model.loss(output, st.target);
    TANDEM_CHECK(loss.dim() == 0, "the loss of model '{}' must be a scalar, not of shape {}",
                 model.name, fmt::join(loss.sizes(), "x"));
    const double weight = static_cast<double>(plan_->slices[mb].second) / plan_->global_batch;
    st.loss = loss * weight;
    if (first_pass) {
      const double metric =
          !plan_->training && model.metric ? model.metric(output, st.target) : 0.0;
      if (slab_ == 0) {  // the other slabs of a spatial split hold the same numbers
        // A copy of its own: a loss reduced by LibTorch (mse_loss's mean) may keep the storage of
        // the whole unreduced loss, which would stay until the step ends.
        result_.microbatch_losses.emplace_back(mb, loss.detach().clone());
        result_.loss = result_.loss.defined() ? result_.loss + st.loss.detach() : st.loss.detach();
        result_.samples += plan_->slices[mb].second;
        result_.metric_sum += metric;
      }
    }
  }
}

void Executor::send_forward(int stage, int mb, int to) {
  MicrobatchState& st = state_.at({stage, mb});
  for (const auto& c : plan_->flow->outputs[stage]) {
    if (c.to_stage != to) continue;
    plan_->transport->send(global_device(stage), global_device(to),
                           key(c.tensor, mb, false, stage, to), st.outputs.at(c.tensor).detach(),
                           st.ready);
    if (!plan_->training || plan_->recompute) --st.pending_sends;
  }
  if (st.pending_sends > 0) return;
  if (!plan_->training) {
    state_.erase({stage, mb});
  } else if (plan_->recompute) {
    st.outputs.clear();
  }
}

void Executor::recv_backward(int stage, int mb, int from) {
  MicrobatchState& st = state_.at({stage, mb});
  for (const auto& c : plan_->flow->outputs[stage]) {
    if (c.to_stage != from) continue;
    st.output_grads[c.tensor][from] =
        plan_->transport->recv(global_device(stage), global_device(from),
                               key(c.tensor, mb, true, from, stage), context_.spec().device);
  }
}

void Executor::backward(int stage, int mb, bool input_only) {
  MicrobatchState& st = state_.at({stage, mb});
  if (plan_->recompute) {
    memory::ScopedWhere where(stage, "recompute", mb);
    st.outputs.clear();
    run_layers(stage, mb, st, /*first_pass=*/false);
  }
  std::vector<torch::Tensor> roots, grads;
  for (const auto& [name, out] : st.outputs) {
    auto it = st.output_grads.find(name);
    TANDEM_ASSERT(it != st.output_grads.end(), "stage {} mb {}: no gradient arrived for '{}'",
                  stage, mb, name);
    torch::Tensor g;
    for (const auto& [consumer, gi] : it->second) {
      // Autograd would broadcast a gradient of another shape, and convert one of another dtype,
      // without a word: what arrived must match the tensor exactly.
      TANDEM_CHECK(gi.sizes() == out.sizes() && gi.scalar_type() == out.scalar_type(),
                   "the gradient of '{}' from stage {} has shape [{}] and dtype {}, but '{}' has "
                   "shape [{}] and dtype {}: the message was corrupted on its way",
                   name, consumer, fmt::join(gi.sizes(), ", "), c10::toString(gi.scalar_type()),
                   name, fmt::join(out.sizes(), ", "), c10::toString(out.scalar_type()));
      g = g.defined() ? g + gi : gi;
    }
    if (out.requires_grad()) {
      roots.push_back(out);
      grads.push_back(g);
    }
  }
  if (st.loss.defined() && st.loss.requires_grad()) {
    roots.push_back(st.loss);
    grads.push_back(torch::full_like(st.loss, plan_->loss_scale));
  }
  graph::DeferredWeightGrads* deferred = nullptr;
  if (auto it = deferred_.find({stage, mb}); it != deferred_.end()) deferred = it->second.get();
  TANDEM_ASSERT(!input_only || deferred, "stage {} mb {}: I action without a deferred queue", stage,
                mb);
  if (deferred) deferred->set_deferring(input_only);
  const bool skipped =
      plan_->skip_backward && std::count(plan_->skip_backward->begin(), plan_->skip_backward->end(),
                                         std::pair<int, int>{stage, mb}) > 0;
  if (!roots.empty() && !skipped) torch::autograd::backward(roots, grads);
  if (deferred) deferred->set_deferring(false);

  for (const auto& c : plan_->flow->inputs[stage]) {
    if (c.from_stage < 0) continue;
    const torch::Tensor& leaf = st.inputs.at(c.tensor);
    torch::Tensor g = leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf);
    // The leaf may live on in deferred W work that keeps it: its gradient goes with the message
    // alone, not with the leaf too.
    leaf.mutable_grad() = torch::Tensor();
    // A gradient that is part of a larger tensor (a convolution of a concatenation hands each
    // part a view of one gradient) would keep all of it until the receiver takes its copy: the
    // message gets its own bytes.
    if (g.has_storage() && g.storage().nbytes() > static_cast<size_t>(g.nbytes()))
      g = g.clone(at::MemoryFormat::Contiguous);
    if (is_local(c.from_stage)) {
      state_.at({c.from_stage, mb}).output_grads[c.tensor][stage] = g;
    } else {
      st.input_grads[c.from_stage][c.tensor] = g;
    }
  }
  if (!input_only) {
    --inflight_[stage];
    deferred_.erase({stage, mb});
  }
  st.inputs.clear();
  st.outputs.clear();
  st.output_grads.clear();
  st.loss = torch::Tensor();
  st.target = torch::Tensor();
  st.ready = context_.record_ready();
  if (st.input_grads.empty()) state_.erase({stage, mb});
}

void Executor::weight_gradients(int stage, int mb) {
  auto it = deferred_.find({stage, mb});
  TANDEM_ASSERT(it != deferred_.end(), "stage {} mb {}: W before I", stage, mb);
  it->second->run_all();
  deferred_.erase(it);
  --inflight_[stage];
}

void Executor::send_backward(int stage, int mb, int to) {
  auto it = state_.find({stage, mb});
  TANDEM_ASSERT(it != state_.end(), "stage {} mb {}: nothing to send to stage {}", stage, mb, to);
  MicrobatchState& st = it->second;
  auto grads = st.input_grads.find(to);
  TANDEM_ASSERT(grads != st.input_grads.end(), "stage {} mb {}: no gradients for stage {}", stage,
                mb, to);
  for (const auto& [name, g] : grads->second) {
    plan_->transport->send(global_device(stage), global_device(to), key(name, mb, true, stage, to),
                           g, st.ready);
  }
  st.input_grads.erase(grads);
  if (st.input_grads.empty()) state_.erase(it);
}

}  // namespace tandem::runtime
