// Measuring each layer's forward and backward times for the planner (layer_times.h).
#include "tandem/runtime/layer_times.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "tandem/common/check.h"
#include "tandem/common/device.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/deferred.h"
#include "tandem/graph/precision.h"

namespace tandem::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// One layer's times, each repetition on a fresh forward.
struct Samples {
  std::vector<double> forward, backward, input, weight;
};

// What a backward of the layer's outputs asks for: the outputs that require a gradient, a seed
// for each, the inputs and the parameters that take one.
struct BackwardOf {
  std::vector<torch::Tensor> roots, seeds, inputs, params;
};

BackwardOf backward_of(const graph::Layer& layer, const graph::Tensors& inputs,
                       const graph::Tensors& outputs) {
  BackwardOf b;
  for (const auto& y : outputs) {
    if (!y.requires_grad()) continue;
    b.roots.push_back(y);
    b.seeds.push_back(torch::ones_like(y));
  }
  for (const auto& x : inputs)
    if (x.requires_grad()) b.inputs.push_back(x);
  for (const auto& p : graph::named_parameters(layer))
    if (p.second.requires_grad()) b.params.push_back(p.second);
  return b;
}

// Seconds of one backward as a pipeline runs it: the gradients of `wrt` added into their
// .grad (nothing to ask for: none). A parameter's gradient is then read and written once more
// per micro-batch, which a gradient call alone leaves out: for a wide dense layer on few rows,
// a good part of its backward.
// The inputs' gradients start empty, as a received input's do; they are dropped afterwards.
double timed_backward(const BackwardOf& b, const std::vector<torch::Tensor>& wrt) {
  if (b.roots.empty() || wrt.empty()) return 0;
  for (torch::Tensor x : b.inputs) x.mutable_grad().reset();
  const Clock::time_point start = Clock::now();
  torch::autograd::backward(b.roots, b.seeds, /*retain_graph=*/false, /*create_graph=*/false, wrt);
  const double seconds = seconds_since(start);
  for (torch::Tensor x : b.inputs) x.mutable_grad().reset();
  return seconds;
}

// The exchanges a group has recorded so far and the bytes they sent.
struct Tally {
  int count = 0;
  double bytes = 0;
};

Tally tally(const spatial::Group* group) {
  Tally t;
  if (!group) return t;
  for (const spatial::Exchange& e : group->exchanges()) {
    ++t.count;
    t.bytes += static_cast<double>(e.bytes_sent);
  }
  return t;
}

}  // namespace

double expected_time(const std::vector<double>& samples) {
  // A step runs every layer many times, so its time is near the sum of the layers' expected
  // times, delays included: on a shared machine another process's turn on a core only ever adds
  // time, and the medians alone left it out (they planned the steps about 11% short). But a
  // layer's few repetitions may meet one long delay that a step meets once, not in every
  // micro-batch that layer runs: no repetition counts for more than twice the median.
  if (samples.empty()) return 0;
  const double cap = 2 * median(samples);
  double sum = 0;
  for (double x : samples) sum += std::min(x, cap);
  return sum / static_cast<double>(samples.size());
}

LayerTimes measure_layer_times(const graph::Model& model, const torch::Tensor& micro_input,
                               spatial::Group* group, int64_t workspace_bound, int repeats,
                               int threads, c10::ScalarType precision, bool split, bool warm_up) {
  TANDEM_CHECK(micro_input.defined() && micro_input.device().is_cpu(),
               "timing layers needs a micro-batch on the CPU");
  TANDEM_CHECK(repeats >= 1, "timing layers needs at least 1 repetition, not {}", repeats);
  TANDEM_CHECK(threads >= 1, "timing layers needs at least 1 thread, not {}", threads);
  // The device's threads, for ATen and BLAS alike (a pipeline sets both: core_share.cc); BLAS
  // is left at them, as a pipeline built afterwards sets it anyway.
  const int threads_before = at::get_num_threads();
  at::set_num_threads(threads);
  set_blas_threads(threads);
  std::map<std::string, size_t> last_read;
  for (size_t i = 0; i < model.layers.size(); ++i)
    for (const auto& name : model.layers[i].inputs) last_read[name] = i;
  // The backwards add to the parameters' gradients, zeros at first as a pipeline's step starts
  // them: the gradients are kept aside, put back at the end.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> grads;
  for (const auto& layer : model.layers)
    for (const auto& p : graph::named_parameters(layer)) {
      grads.emplace_back(p.second,
                         p.second.grad().defined() ? p.second.grad().clone() : torch::Tensor());
      if (p.second.requires_grad()) p.second.mutable_grad() = torch::zeros_like(p.second);
    }
  graph::CallContext call;
  call.group = group;
  call.workspace_bound = workspace_bound;
  call.precision = precision;
  // In rounds, each a pass through every layer from the model's input: a layer's repetitions
  // spread over the whole measurement, so that the layers' times share the machine's load over
  // it rather than each taking the moment of its own repetitions (on a shared machine the load
  // changes over seconds, more than between repetitions). Round 0, if asked for, is the warm-up.
  std::vector<Samples> samples(model.layers.size());
  LayerTimes out;
  if (group) {
    const size_t n = model.layers.size();
    out.forward_exchanges.assign(n, 0);
    out.backward_exchanges.assign(n, 0);
    out.forward_exchange_bytes.assign(n, 0.0);
    out.backward_exchange_bytes.assign(n, 0.0);
  }
  const int first = warm_up ? 0 : 1;  // the round that counts the exchanges
  for (int r = first; r <= repeats; ++r) {
    std::map<std::string, torch::Tensor> env{{model.input, micro_input}};
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const graph::Layer& layer = model.layers[i];
      call.layer = static_cast<int>(i);
      graph::ScopedCall scoped(call);
      graph::Tensors inputs;
      for (const auto& name : layer.inputs) inputs.push_back(env.at(name));
      Samples& s = samples[i];
      const Tally before = r == first ? tally(group) : Tally{};
      Clock::time_point start = Clock::now();
      graph::Tensors outputs = graph::forward_in_precision(layer, inputs);
      const double forward = seconds_since(start);
      const Tally forwarded = r == first ? tally(group) : Tally{};
      BackwardOf b = backward_of(layer, inputs, outputs);
      std::vector<torch::Tensor> all = b.inputs;
      all.insert(all.end(), b.params.begin(), b.params.end());
      const double backward = timed_backward(b, all);
      if (r == first && group) {
        // The first round counts the exchanges (every round makes the same).
        const Tally after = tally(group);
        out.forward_exchanges[i] = forwarded.count - before.count;
        out.forward_exchange_bytes[i] = forwarded.bytes - before.bytes;
        out.backward_exchanges[i] = after.count - forwarded.count;
        out.backward_exchange_bytes[i] = after.bytes - forwarded.bytes;
      }
      for (size_t k = 0; k < outputs.size(); ++k) {
        if (!last_read.count(layer.outputs[k])) continue;
        env[layer.outputs[k]] = outputs[k].detach().requires_grad_(outputs[k].requires_grad());
      }
      outputs.clear();
      b = {};
      if (r > 0) {
        s.forward.push_back(forward);
        s.backward.push_back(backward);
      }
      if (split) {
        // The split backward as a pipeline runs it: the input half with the layer's weight work
        // deferred (a layer that defers none runs its whole backward there), then that work.
        graph::DeferredWeightGrads queue;
        {
          graph::CallContext deferring = call;
          deferring.deferred = &queue;
          graph::ScopedCall in_queue(deferring);
          outputs = graph::forward_in_precision(layer, inputs);
        }
        b = backward_of(layer, inputs, outputs);
        outputs.clear();
        all = b.inputs;
        all.insert(all.end(), b.params.begin(), b.params.end());
        queue.set_deferring(true);
        const double input = timed_backward(b, all);
        queue.set_deferring(false);
        start = Clock::now();
        queue.run_all();
        const double weight = seconds_since(start);
        if (r > 0) {
          s.input.push_back(input);
          s.weight.push_back(weight);
        }
      }
      for (const auto& name : layer.inputs)
        if (last_read.at(name) == i) env.erase(name);
    }
  }
  for (const Samples& s : samples) {
    out.forward.push_back(expected_time(s.forward));
    out.backward.push_back(expected_time(s.backward));
    if (split) {
      out.input.push_back(expected_time(s.input));
      out.weight.push_back(expected_time(s.weight));
    }
  }
  for (auto& [param, grad] : grads) param.mutable_grad() = grad;
  at::set_num_threads(threads_before);
  return out;
}

LayerTimes combined(const std::vector<LayerTimes>& passes) {
  TANDEM_CHECK(!passes.empty(), "combining layer times needs at least one measurement");
  LayerTimes out = passes.front();  // the exchanges: every pass counts the same
  auto each = [&](std::vector<double> LayerTimes::*field, bool mean) {
    std::vector<double>& to = out.*field;
    for (size_t l = 0; l < to.size(); ++l) {
      std::vector<double> samples;
      for (const LayerTimes& p : passes) {
        const std::vector<double>& from = p.*field;
        TANDEM_CHECK(from.size() == to.size(),
                     "combining layer times of {} and of {} layers (or halves, or steps)",
                     to.size(), from.size());
        samples.push_back(from[l]);
      }
      to[l] = mean ? std::accumulate(samples.begin(), samples.end(), 0.0) /
                         static_cast<double>(samples.size())
                   : expected_time(samples);
    }
  };
  each(&LayerTimes::forward, false);
  each(&LayerTimes::backward, false);
  each(&LayerTimes::input, false);
  each(&LayerTimes::weight, false);
  each(&LayerTimes::step, true);  // the optimizer runs once per step: its mean
  each(&LayerTimes::zero, true);  // as the zeroing does
  return out;
}

std::string to_json(const LayerTimes& times) {
  nlohmann::json j;
  j["forward"] = times.forward;
  j["backward"] = times.backward;
  j["input"] = times.input;
  j["weight"] = times.weight;
  j["step"] = times.step;
  j["zero"] = times.zero;
  j["forward_exchanges"] = times.forward_exchanges;
  j["backward_exchanges"] = times.backward_exchanges;
  j["forward_exchange_bytes"] = times.forward_exchange_bytes;
  j["backward_exchange_bytes"] = times.backward_exchange_bytes;
  return j.dump();
}

LayerTimes layer_times_from_json(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    LayerTimes out;
    j.at("forward").get_to(out.forward);
    j.at("backward").get_to(out.backward);
    j.at("input").get_to(out.input);
    j.at("weight").get_to(out.weight);
    j.at("step").get_to(out.step);
    j.at("zero").get_to(out.zero);
    j.at("forward_exchanges").get_to(out.forward_exchanges);
    j.at("backward_exchanges").get_to(out.backward_exchanges);
    j.at("forward_exchange_bytes").get_to(out.forward_exchange_bytes);
    j.at("backward_exchange_bytes").get_to(out.backward_exchange_bytes);
    const size_t n = out.forward.size();
    const size_t exchanged = out.forward_exchanges.size();
    TANDEM_CHECK((exchanged == n || exchanged == 0) && out.backward_exchanges.size() == exchanged &&
                     out.forward_exchange_bytes.size() == exchanged &&
                     out.backward_exchange_bytes.size() == exchanged,
                 "a layer time measurement has {} forwards but {} of its exchanges counted", n,
                 exchanged);
    const size_t split = out.input.size();
    TANDEM_CHECK(out.backward.size() == n && (split == n || split == 0) &&
                     out.weight.size() == split && (out.step.empty() || out.step.size() == n) &&
                     (out.zero.empty() || out.zero.size() == n),
                 "a layer time measurement has {} forwards but {}, {} and {} backwards, {} "
                 "optimizer steps and {} zeroings",
                 n, out.backward.size(), out.input.size(), out.weight.size(), out.step.size(),
                 out.zero.size());
    return out;
  } catch (const nlohmann::json::exception& e) {
    TANDEM_CHECK(false, "not a layer time measurement: {}", e.what());
  }
}

}  // namespace tandem::runtime
