#include "tandem/runtime/memory_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "schedule/held_messages.h"
#include "tandem/common/check.h"
#include "tandem/memory/bytes.h"
#include "tandem/schedule/simulate.h"

namespace tandem::runtime {
namespace {
// The forward FLOPs per sample of layers [begin, end), of those that know theirs.
double forward_flops(const graph::Model& model, int begin, int end) {
  double flops = 0;
  for (int i = begin; i < end; ++i) flops += model.layers[i].forward_flops_per_sample;
  return flops;
}

// The parts of a stage's predicted peak.
struct StageParts {
  double per_microbatch = 0;  // kept per micro-batch in flight
  double workspace = 0;       // held above the activations at the worst layer, and returned
                              // gradients of what the stage sent
  double state = 0;           // parameters, gradients, optimizer slots
  double recomputed = 0;      // with recomputation: one micro-batch's activations
  double received = 0;        // the inputs of one micro-batch from earlier stages
  double sent_on = 0;         // the activations of one micro-batch it sends to later stages
  // `messages`: bytes of messages held in a backward besides the above (held_messages.h).
  double peak(int in_flight, double messages) const {
    return state + in_flight * per_microbatch + messages + recomputed + workspace;
  }
};

// Who makes and who reads every named tensor, by index: what a stage's prediction needs,
// built once per model so that a partition search costs O(layers) per candidate stage.
struct TensorUses {
  std::vector<int> producer;              // per tensor: the layer that makes it; -1: graph input
  std::vector<std::vector<int>> readers;  // per tensor: the layers that read it, ascending
  std::vector<double> bytes;              // per tensor: bytes for one micro-batch
  std::vector<std::vector<int>> touched;  // per layer: the tensors it reads or makes
  int output = -1;                        // the model's output
};

TensorUses index_tensors(const graph::Model& model, const LayerBytes& bytes) {
  TensorUses u;
  std::map<std::string, int> ids;
  auto id = [&](const std::string& name) {
    auto [it, added] = ids.emplace(name, static_cast<int>(u.producer.size()));
    if (added) {
      u.producer.push_back(-1);
      u.readers.emplace_back();
      u.bytes.push_back(static_cast<double>(bytes.tensors.at(name)));
    }
    return it->second;
  };
  id(model.input);
  u.touched.resize(model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const int layer = static_cast<int>(i);
    for (const auto& name : model.layers[i].inputs) {
      const int t = id(name);
      if (u.readers[t].empty() || u.readers[t].back() != layer) u.readers[t].push_back(layer);
      u.touched[i].push_back(t);
    }
    for (const auto& name : model.layers[i].outputs) {
      const int t = id(name);
      u.producer[t] = layer;
      u.touched[i].push_back(t);
    }
  }
  u.output = id(model.output);
  return u;
}

StageParts stage_parts(const TensorUses& u, const LayerBytes& bytes, int begin, int end,
                       bool recompute, const graph::Partition* partition) {
  StageParts out;
  // The micro-batch that runs holds, at layer i: what layers begin..i left alive (a backward
  // frees the later layers' tensors first: autograd runs nodes in reverse creation order); the
  // tensors it sent, which later layers made (kept until its backward ends); the gradients of
  // tensors made before layer i that a later layer of the stage reads (a skip's gradient
  // waits for its producer); and layer i's passing workspace. The gradient of layer i's own
  // output is consumed as its backward starts. The largest such sum, less all of the
  // micro-batch's activations, plus the gradients of what it sent, is the stage's workspace.
  // held[i - begin] changes by delta[i - begin] from layer i on.
  std::vector<double> delta(end - begin + 1, 0);
  auto hold = [&](int from, int to, double b) {  // held at layers [from, to]
    from = std::max(from, begin);
    to = std::min(to, end - 1);
    if (from > to) return;
    delta[from - begin] += b;
    delta[to + 1 - begin] -= b;
  };
  double received = 0, sent = 0, sent_on = 0;
  std::vector<char> seen(u.producer.size(), 0);
  for (int i = begin; i < end; ++i) {
    for (const int t : u.touched[i]) {
      if (seen[t]) continue;
      seen[t] = 1;
      const int made = u.producer[t];
      const auto& readers = u.readers[t];
      const auto after = std::lower_bound(readers.begin(), readers.end(), end);
      // Its gradient waits from after the layer that makes it (or from the stage's start, for
      // what the stage receives) until the stage's last layer that reads it runs backward.
      if (after != readers.begin() && *std::prev(after) > made)
        hold(made + 1, *std::prev(after) - 1, u.bytes[t]);
      if (made < begin) {
        received += u.bytes[t];  // its own copy per micro-batch in flight
        continue;
      }
      if (after == readers.end() && t != u.output) continue;
      // Sent on. During its backward the stage holds every gradient message for it, one per
      // later stage that reads it (without the partition, while partitions are searched, one
      // per later layer: a bound from above), and from two messages on their sum
      // (Executor::backward); a layer of the stage that reads it too adds its part to that
      // sum, one more. A tensor no later layer reads is the output: its gradient comes from
      // the loss on this stage.
      std::set<int> senders;
      for (auto r = after; r != readers.end(); ++r)
        senders.insert(partition ? partition->stage_of_layer[*r] : *r);
      const int k = std::max<int>(1, static_cast<int>(senders.size()));
      const bool inside = std::upper_bound(readers.begin(), after, made) != after;
      sent += u.bytes[t] * (k + (k >= 2 || inside ? 1 : 0));
      if (after != readers.end()) sent_on += u.bytes[t];
      hold(begin, made - 1, u.bytes[t]);  // kept until the backward ends
    }
  }
  double activations = 0, largest_at_a_layer = 0, held = 0;
  for (int i = begin; i < end; ++i) {
    activations += static_cast<double>(bytes.activations[i]);
    out.state += static_cast<double>(bytes.state[i]);
    held += delta[i - begin];
    largest_at_a_layer =
        std::max(largest_at_a_layer, activations + held + static_cast<double>(bytes.transient[i]));
  }
  out.workspace = largest_at_a_layer - activations + sent;
  out.received = received;
  out.sent_on = sent_on;
  if (!recompute) {
    out.per_microbatch = activations + received;
    return out;
  }
  // Kept per micro-batch in flight: only the tensors the stage reads from before it.
  out.per_microbatch = received;
  out.recomputed = activations;
  return out;
}

}  // namespace

double stage_bytes(const graph::Model& model, const LayerBytes& bytes, int begin, int end,
                   int in_flight, bool recompute) {
  return stage_parts(index_tensors(model, bytes), bytes, begin, end, recompute, nullptr)
      .peak(in_flight, 0.0);
}

namespace {

// Per stage: bytes of messages it holds in a backward besides its activations, under `lowered`
// on `partition` (null: none).
struct Messages {
  std::vector<double> ahead;  // received and not used yet: as the schedule orders its recvs
  std::vector<double> late;   // sent, and not yet taken by a receiver that runs late
};
Messages message_bytes(const graph::Model& model, const LayerBytes& bytes,
                       const graph::Partition& partition, bool recompute,
                       const schedule::Schedule* lowered) {
  Messages m;
  m.ahead.assign(partition.num_stages, 0);
  m.late.assign(partition.num_stages, 0);
  if (!lowered) return m;
  TANDEM_CHECK(lowered->num_stages == partition.num_stages,
               "the schedule has {} stages but the partition {}", lowered->num_stages,
               partition.num_stages);
  const graph::Flow flow = graph::analyze(model, partition);
  auto between = [&](const std::vector<graph::Crossing>& crossings, bool from, int peer) {
    double b = 0;
    for (const auto& c : crossings)
      if ((from ? c.from_stage : c.to_stage) == peer)
        b += static_cast<double>(bytes.tensors.at(c.tensor));
    return b;
  };
  m.ahead = schedule::peak_received_ahead(*lowered, [&](int stage, int from, schedule::Op op) {
    // An input has the bytes of what `from` sends; a gradient, of what is sent to `from`.
    return op == schedule::Op::kForward ? between(flow.inputs[stage], true, from)
                                        : between(flow.outputs[stage], false, from);
  });
  // A gradient it sends has the bytes of what it received from `peer`; an activation it sends
  // is held anyway until its backward, except with recomputation.
  const schedule::StageGraph graph{partition.num_stages, flow.consumers()};
  m.late =
      schedule::peak_sent_unreceived(*lowered, graph, [&](int stage, int peer, schedule::Op op) {
        if (op != schedule::Op::kForward) return between(flow.inputs[stage], true, peer);
        return recompute ? between(flow.outputs[stage], false, peer) : 0.0;
      });
  return m;
}

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

// Per stage: the planned peak, with the messages late receivers leave when `late` is set.
std::vector<double> peaks(const graph::Model& model, const LayerBytes& bytes,
                          const graph::Partition& partition, const std::vector<int>& in_flight,
                          bool recompute, const schedule::Schedule* lowered, bool late) {
  TANDEM_CHECK(static_cast<int>(in_flight.size()) == partition.num_stages,
               "{} micro-batch counts for {} stages", in_flight.size(), partition.num_stages);
  const TensorUses uses = index_tensors(model, bytes);
  const Messages m = message_bytes(model, bytes, partition, recompute, lowered);
  std::vector<double> out;
  for (int s = 0; s < partition.num_stages; ++s) {
    auto [begin, end] = partition.layers_of(s);
    out.push_back(stage_parts(uses, bytes, begin, end, recompute, &partition)
                      .peak(in_flight[s], m.ahead[s] + (late ? m.late[s] : 0.0)));
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

std::string memory_plan_table(const graph::Model& model, const LayerBytes& bytes,
                              const graph::Partition& partition, const std::vector<int>& in_flight,
                              bool recompute, const schedule::Schedule* lowered) {
  const char* row = "{:<6} {:<28} {:>7} {:>9} {:>13} {:>11} {:>13} {:>11} {:>12} {:>11} {:>11}\n";
  std::string out = fmt::format(row, "stage", "layers", "FLOPs", "in flight",
                                recompute ? "inputs per mb" : "kept per mb", "workspace",
                                "recv. ahead", "state", "planned peak", "late recv.", "at most");
  const TensorUses uses = index_tensors(model, bytes);
  const Messages m = message_bytes(model, bytes, partition, recompute, lowered);
  auto mib = [](double b) { return memory::format_bytes(static_cast<uint64_t>(b)); };
  const double total_flops = forward_flops(model, 0, static_cast<int>(model.layers.size()));
  for (int s = 0; s < partition.num_stages; ++s) {
    auto [begin, end] = partition.layers_of(s);
    const StageParts p = stage_parts(uses, bytes, begin, end, recompute, &partition);
    const double planned = p.peak(in_flight[s], m.ahead[s]);
    // The stage's share of the model's forward FLOPs, where the layers know theirs.
    const std::string share =
        total_flops > 0
            ? fmt::format("{:.0f}%", 100 * forward_flops(model, begin, end) / total_flops)
            : "-";
    out += fmt::format(row, s, partition.layer_range(model, s), share, in_flight[s],
                       mib(p.per_microbatch), mib(p.workspace), mib(m.ahead[s]), mib(p.state),
                       mib(planned), mib(m.late[s]), mib(planned + m.late[s]));
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
                   bytes.state.size() == model.layers.size(),
               "memory was measured for {} layers but model '{}' has {}", bytes.activations.size(),
               model.name, model.layers.size());
  auto uses = std::make_shared<const TensorUses>(index_tensors(model, bytes));
  auto ahead =
      std::make_shared<const ChainAhead>(chain_ahead(chain, static_cast<int>(in_flight.size())));
  return [uses, ahead, &bytes, in_flight, recompute](int stage, int begin, int end) {
    const StageParts p = stage_parts(*uses, bytes, begin, end, recompute, nullptr);
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
                                  double stage_budget, const schedule::Schedule* chain) {
  TANDEM_CHECK(stage_budget > 0, "a stage's memory budget must be positive, not {}", stage_budget);
  const auto peak = search_peak(model, bytes, in_flight, recompute, chain);
  const double total = forward_flops(model, 0, static_cast<int>(model.layers.size()));
  // A stage that fits costs its share of the FLOPs, in [0, 1]; one that does not, more than 1
  // and more the larger its peak. The costliest stage is then smallest for the split that fits
  // with the most even FLOPs, or, when none fits, for the smallest largest peak.
  return graph::partition_by_cost(
      model, static_cast<int>(in_flight.size()), [&](int stage, int begin, int end) {
        const double planned = peak(stage, begin, end);
        if (planned > stage_budget) return 1.0 + planned / stage_budget;
        return total > 0 ? forward_flops(model, begin, end) / total : 0.0;
      });
}

}  // namespace tandem::runtime
