// Planning: the predicted peak of every stage from the measured bytes of its layers
// (stage_memory.h), and the partitions searched by it.
#include "tandem/runtime/memory_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "runtime/stage_memory.h"
#include "schedule/held_messages.h"
#include "tandem/common/check.h"
#include "tandem/memory/bytes.h"
#include "tandem/schedule/simulate.h"

namespace tandem::runtime {

double stage_bytes(const graph::Model& model, const LayerBytes& bytes, int begin, int end,
                   int in_flight, bool recompute) {
  return stage_parts(index_tensors(model, bytes), bytes, begin, end, recompute, nullptr)
      .peak(in_flight, 0.0);
}

namespace {

// Per stage, while partitions are searched: micro-batches of inputs and of gradients received
// ahead, under `chain` (the schedule lowered on a chain of stages; null: none). A stage's
// received and sent bytes weigh them.
struct ChainAhead {
  std::vector<double> inputs, gradients;
};
ChainAhead chain_ahead(const schedule::Schedule* chain, int stages) {
  ChainAhead m;
  m.inputs.assign(stages, 0);
  m.gradients.assign(stages, 0);
  if (!chain) return m;
  TANDEM_CHECK(chain->num_stages == stages, "the schedule has {} stages but {} are asked for",
               chain->num_stages, stages);
  auto only = [](bool forward) {
    return [forward](int, int, schedule::Op op) {
      return (op == schedule::Op::kForward) == forward ? 1.0 : 0.0;
    };
  };
  m.inputs = schedule::peak_received_ahead(*chain, only(true));
  m.gradients = schedule::peak_received_ahead(*chain, only(false));
  return m;
}

// The most the stages of `parts` hold at once over `actions` (one device's, in order; only the
// compute actions of stages in `of`, all when empty): at each, the acting micro-batch at its
// worst (StageParts::running) and each other micro-batch as it is kept then: between its F and
// its B (or I) its activations (StageParts::kept), between its I and its W what its deferred
// work keeps (StageParts::deferred). `at_most`: with what a late receiver leaves in transit.
// `local` (null: none): per stage, the gradients its backward hands to stages on its own device
// (Executor::backward), by producer: each waits there until the producer's backward of that
// micro-batch, which counts it in its workspace.
struct LocalGradient {
  int producer;
  double bytes;
};
using LocalGradients = std::vector<std::vector<LocalGradient>>;
double running_at_worst(const std::vector<StageParts>& parts,
                        const std::vector<schedule::Action>& actions, const std::set<int>& of,
                        bool at_most, const LocalGradients* local = nullptr) {
  std::map<int, int> before_input, before_weight;  // by stage: micro-batches held each way
  std::map<std::pair<int, int>, double> waiting;   // by (producer, micro-batch): local gradients
  double most = 0;
  for (const schedule::Action& a : actions) {
    if (a.kind != schedule::Kind::kCompute || (!of.empty() && !of.count(a.stage))) continue;
    const StageParts& p = parts[static_cast<size_t>(a.stage)];
    const bool backward = a.op == schedule::Op::kBackward || a.op == schedule::Op::kInput;
    if (a.op == schedule::Op::kForward) ++before_input[a.stage];
    // The acting micro-batch is counted below as it is kept: take that out for its worst.
    double held = a.op == schedule::Op::kWeight    ? p.weighing() - p.deferred
                  : a.op == schedule::Op::kForward ? p.forwarding() - p.kept
                                                   : p.computing() - p.kept;
    for (const auto& [stage, count] : before_input)
      held += count * parts[static_cast<size_t>(stage)].kept;
    for (const auto& [stage, count] : before_weight)
      held += count * parts[static_cast<size_t>(stage)].deferred;
    for (const auto& [key, b] : waiting)
      if (!backward || key != std::pair<int, int>{a.stage, a.microbatch}) held += b;
    const bool several = before_input[a.stage] + before_weight[a.stage] > 1;
    most = std::max(most, held + (at_most && several ? p.in_transit : 0.0));
    if (backward && local) {
      waiting.erase({a.stage, a.microbatch});
      for (const LocalGradient& g : (*local)[static_cast<size_t>(a.stage)])
        waiting[{g.producer, a.microbatch}] += g.bytes;
    }
    if (backward) --before_input[a.stage];
    if (a.op == schedule::Op::kInput) ++before_weight[a.stage];
    if (a.op == schedule::Op::kWeight) --before_weight[a.stage];
  }
  return most;
}

// Per stage: the planned peak, with the messages late receivers leave when `late` is set.
std::vector<double> peaks(const graph::Model& model, const LayerBytes& bytes,
                          const graph::Partition& partition, const std::vector<int>& in_flight,
                          bool recompute, const schedule::Schedule* lowered, bool late) {
  TANDEM_CHECK(static_cast<int>(in_flight.size()) == partition.num_stages,
               "{} micro-batch counts for {} stages", in_flight.size(), partition.num_stages);
  const TensorUses uses = index_tensors(model, bytes);
  const Messages m = message_bytes(model, bytes, partition, recompute, lowered);
  std::vector<double> out;
  const bool split = splits_backward(lowered);
  const int with_loss = loss_stage(uses, partition);
  std::vector<StageParts> parts;
  for (int s = 0; s < partition.num_stages; ++s) {
    auto [begin, end] = partition.layers_of(s);
    parts.push_back(stage_parts(uses, bytes, begin, end, recompute, &partition, split));
  }
  for (int s = 0; s < partition.num_stages; ++s) {
    const StageParts& p = parts[static_cast<size_t>(s)];
    const double messages = m.ahead[s] + (late ? m.late[s] : 0.0);
    const double scalars =
        s == with_loss ? loss_scalars(lowered, in_flight[static_cast<size_t>(s)]) : 0.0;
    if (!split) {
      out.push_back(p.peak(in_flight[s], messages, late) + scalars);
      continue;
    }
    // Under a split backward the schedule says which micro-batches wait for their I and which
    // for their W: the stage's own actions on its device, in order.
    double most = 0;
    for (const auto& actions : lowered->device_actions)
      most = std::max(most, running_at_worst(parts, actions, {s}, late));
    out.push_back(p.state + std::max(most + messages, p.step) + scalars);
  }
  return out;
}

}  // namespace

std::vector<double> stage_peaks(const graph::Model& model, const LayerBytes& bytes,
                                const graph::Partition& partition,
                                const std::vector<int>& in_flight, bool recompute,
                                const schedule::Schedule* lowered) {
  return peaks(model, bytes, partition, in_flight, recompute, lowered, true);
}

std::vector<double> planned_peaks(const graph::Model& model, const LayerBytes& bytes,
                                  const graph::Partition& partition,
                                  const std::vector<int>& in_flight, bool recompute,
                                  const schedule::Schedule* lowered) {
  return peaks(model, bytes, partition, in_flight, recompute, lowered, false);
}

std::vector<double> device_peaks(const graph::Model& model, const LayerBytes& bytes,
                                 const graph::Partition& partition, bool recompute,
                                 const schedule::Schedule& lowered, bool at_most) {
  TANDEM_CHECK(lowered.num_stages == partition.num_stages,
               "the schedule has {} stages but the partition {}", lowered.num_stages,
               partition.num_stages);
  const TensorUses uses = index_tensors(model, bytes);
  const Messages m = message_bytes(model, bytes, partition, recompute, &lowered);
  const bool split = splits_backward(&lowered);
  const int with_loss = loss_stage(uses, partition);
  std::vector<StageParts> parts;
  for (int s = 0; s < partition.num_stages; ++s) {
    auto [begin, end] = partition.layers_of(s);
    parts.push_back(stage_parts(uses, bytes, begin, end, recompute, &partition, split));
  }
  // A stage takes what a stage on its own device sends it as the same tensor (Executor::
  // forward), which the producer keeps until its backward, after the receiver's: the receiver
  // holds no bytes of its own for it. With recomputation the producer keeps nothing.
  // Its backward hands their gradients back the same way.
  LocalGradients local(static_cast<size_t>(partition.num_stages));
  if (lowered.stage_device.size() == static_cast<size_t>(partition.num_stages)) {
    const graph::Flow flow = graph::analyze(model, partition);
    for (int s = 0; s < partition.num_stages; ++s) {
      double shared = 0;
      for (const graph::Crossing& c : flow.inputs[s]) {
        if (c.from_stage < 0 || lowered.stage_device[c.from_stage] != lowered.stage_device[s])
          continue;
        const double b = static_cast<double>(bytes.tensors.at(c.tensor));
        shared += b;
        local[static_cast<size_t>(s)].push_back({c.from_stage, b});
      }
      if (recompute) continue;
      StageParts& p = parts[static_cast<size_t>(s)];
      shared = std::min(shared, p.received);
      p.received -= shared;
      p.kept -= shared;
      p.per_microbatch = std::max(p.kept, p.deferred);
    }
  }
  std::vector<double> out;
  for (const auto& actions : lowered.device_actions) {
    double state = 0, ahead = 0, step = 0;
    std::set<int> stages;
    for (const schedule::Action& a : actions) {
      if (a.kind != schedule::Kind::kCompute || !stages.insert(a.stage).second) continue;
      state += parts[a.stage].state;
      ahead += m.ahead[a.stage] + (at_most ? m.late[a.stage] : 0.0);
      step = std::max(step, parts[a.stage].step);
    }
    const double most = running_at_worst(parts, actions, {}, at_most, &local);
    out.push_back(state + std::max(most + ahead, step) +
                  (stages.count(with_loss) ? loss_scalars(&lowered, 0) : 0.0));
  }
  return out;
}

std::optional<FlopForecast> flop_forecast(const graph::Model& model,
                                          const graph::Partition& partition,
                                          const schedule::Schedule& schedule) {
  TANDEM_CHECK(schedule.num_stages == partition.num_stages,
               "the schedule has {} stages but the partition {}", schedule.num_stages,
               partition.num_stages);
  schedule::Costs costs;
  double total = 0;
  for (int s = 0; s < partition.num_stages; ++s) {
    auto [begin, end] = partition.layers_of(s);
    const double flops = forward_flops(model, begin, end);
    costs.forward.push_back(flops);
    costs.backward.push_back(2 * flops);
    total += flops;
  }
  if (total <= 0) return std::nullopt;
  const schedule::StageGraph graph{partition.num_stages,
                                   graph::analyze(model, partition).consumers()};
  const schedule::Timeline t = schedule::simulate(schedule::compute_only(schedule), graph, costs);
  // Every device busy all the time: the whole work of the step spread evenly.
  const double even = 3 * total * schedule.num_microbatches / schedule.num_devices;
  return FlopForecast{t.makespan / even, t.bubble};
}

namespace {

// The planned peak of layers [begin, end) as stage `stage` while partitions are searched, under
// `chain` (the schedule lowered on a chain of stages; null: no messages counted). Valid while
// `bytes` lives.
std::function<double(int, int, int)> search_peak(const graph::Model& model, const LayerBytes& bytes,
                                                 const std::vector<int>& in_flight, bool recompute,
                                                 const schedule::Schedule* chain) {
  TANDEM_CHECK(bytes.activations.size() == model.layers.size() &&
                   bytes.transient.size() == model.layers.size() &&
                   bytes.forward.size() == model.layers.size() &&
                   bytes.backward.size() == model.layers.size() &&
                   bytes.backward_held.size() == model.layers.size() &&
                   bytes.state.size() == model.layers.size(),
               "memory was measured for {} layers but model '{}' has {}", bytes.activations.size(),
               model.name, model.layers.size());
  auto uses = std::make_shared<const TensorUses>(index_tensors(model, bytes));
  auto ahead =
      std::make_shared<const ChainAhead>(chain_ahead(chain, static_cast<int>(in_flight.size())));
  const bool split = splits_backward(chain);
  return [uses, ahead, &bytes, in_flight, recompute, split](int stage, int begin, int end) {
    const StageParts p = stage_parts(*uses, bytes, begin, end, recompute, nullptr, split);
    // Inputs have the bytes it receives; gradients, the bytes it sends on.
    return p.peak(in_flight[stage],
                  ahead->inputs[stage] * p.received + ahead->gradients[stage] * p.sent_on);
  };
}

}  // namespace

graph::Partition partition_by_memory(const graph::Model& model, const LayerBytes& bytes,
                                     const std::vector<int>& in_flight, bool recompute,
                                     const schedule::Schedule* chain) {
  return graph::partition_by_cost(model, static_cast<int>(in_flight.size()),
                                  search_peak(model, bytes, in_flight, recompute, chain));
}

graph::Partition partition_to_fit(const graph::Model& model, const LayerBytes& bytes,
                                  const std::vector<int>& in_flight, bool recompute,
                                  double stage_budget, const schedule::Schedule* chain,
                                  const std::vector<double>* layer_costs, double slack) {
  TANDEM_CHECK(stage_budget > 0, "a stage's memory budget must be positive, not {}", stage_budget);
  TANDEM_CHECK(!layer_costs || layer_costs->size() == model.layers.size(),
               "{} layer costs for a model of {} layers", layer_costs ? layer_costs->size() : 0,
               model.layers.size());
  const auto peak = search_peak(model, bytes, in_flight, recompute, chain);
  auto work = [&](int begin, int end) {
    if (!layer_costs) return forward_flops(model, begin, end);
    double sum = 0;
    for (int l = begin; l < end; ++l) sum += (*layer_costs)[static_cast<size_t>(l)];
    return sum;
  };
  const double total = work(0, static_cast<int>(model.layers.size()));
  // A stage that fits costs its share of the work, in [0, 1]; one that does not, more than 1
  // and more the larger its peak. The costliest stage is then smallest for the split that fits
  // with the most even work, or, when none fits, for the smallest largest peak.
  const int stages = static_cast<int>(in_flight.size());
  auto cost = [&](int stage, int begin, int end) {
    const double planned = peak(stage, begin, end);
    if (planned > stage_budget) return 1.0 + planned / stage_budget;
    return total > 0 ? work(begin, end) / total : 0.0;
  };
  const double costliest =
      graph::costliest_stage(graph::partition_by_cost(model, stages, cost), cost);
  // Then the most even split whose work is within `slack` of that, among those that fit (or,
  // when none fits, with that smallest largest peak).
  const double cap = costliest <= 1 ? std::min(1.0, costliest * (1 + slack)) : costliest;
  return graph::partition_under_cap(model, stages, cost, cap);
}

}  // namespace tandem::runtime
