// The planner (planner.h): the space and every configuration planned. Its costs are measured in
// plan_costs.cc, the largest volume searched in largest_volume.cc, the text in planner_output.cc.
#include "tandem/train/planner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "contended_step.h"
#include "memory_partition.h"
#include "schedule/lower.h"
#include "tandem/common/check.h"
#include "tandem/common/device.h"
#include "tandem/graph/precision.h"
#include "tandem/schedule/registry.h"
#include "tandem/schedule/simulate.h"
#include "tandem/spatial/slabs.h"
#include "tandem/train/job.h"
#include "tandem/train/options.h"

namespace tandem::train {
namespace {

// The most micro-batches the space tries unless --microbatches is given: each count of another
// micro-batch size is one more layout to measure, and past 16 the bubble of the schedules on
// the devices this machine lends (at most 16 groups) has shrunk below what the smaller
// micro-batches lose in each layer's efficiency.
constexpr int kMostMicrobatches = 16;

// A sample's planes along the model's slab dimension (0: none), as plan_run reads them.
int64_t depth_of(const graph::Model& model, const Source& source) {
  const std::vector<int64_t> sample = source.input_shape();
  return model.slab_dim >= 1 && model.slab_dim <= static_cast<int>(sample.size())
             ? sample[static_cast<size_t>(model.slab_dim - 1)]
             : 0;
}

// Whether slabs of `spatial` devices can cut the model's samples (plan_run refuses the rest).
bool slabs_cut(const graph::Model& model, int64_t depth, int spatial) {
  if (spatial == 1) return true;
  if (!model.slab_refusal.empty() || model.slab_dim < 0) return false;
  if (depth >= model.slab_multiple && depth % model.slab_multiple != 0) return false;
  return spatial::most_slabs(depth, model.slab_multiple) >= spatial;
}

// Whether a schedule's step runs a backward (forward-only does not).
bool trains(const std::string& name) {
  schedule::Options o;
  o.stages = 2;
  o.microbatches = 2;
  o.virtual_stages = schedule::schedule_kind(name).stages_per_device == 0 ? 2 : 1;
  try {
    const schedule::Schedule s = schedule::make(name, o);
    for (const auto& actions : s.device_actions)
      for (const schedule::Action& a : actions)
        if (a.kind == schedule::Kind::kCompute && a.op != schedule::Op::kForward) return true;
  } catch (const Error&) {
    return true;  // it refuses two stages; the configurations it can run say so themselves
  }
  return false;
}

int64_t micro_of(int64_t batch, int microbatches) {
  return batch / microbatches + (batch % microbatches ? 1 : 0);
}

std::string flag_and_value(const Config& c, const std::string& field) {
  const ConfigOption o = config_option(field);
  return o.value == OptionValue::kSwitch ? o.flag : o.flag + " " + o.get(c);
}

// The flags that say configuration `c` (the fields the planner sets).
std::string configuration_flags(const Config& c) {
  std::vector<std::string> words;
  if (c.spatial > 1) words.push_back(flag_and_value(c, "spatial"));
  words.push_back(flag_and_value(c, "schedule"));
  if (schedule::stages_per_device(c.schedule, c.virtual_stages) > 1 &&
      schedule::schedule_kind(c.schedule).stages_per_device == 0)
    words.push_back(flag_and_value(c, "virtual_stages"));
  words.push_back(flag_and_value(c, "microbatches"));
  words.push_back(flag_and_value(c, "recompute"));
  if (c.balance.size() > 1) words.push_back(flag_and_value(c, "balance"));
  if (c.precision != Precision::kFp32) words.push_back(flag_and_value(c, "precision"));
  return fmt::format("{}", fmt::join(words, " "));
}

// Contiguous splits of `layers` layers into `stages` stages, each as its layer counts; stops
// (returns false) once more than `most` are found.
bool contiguous_splits(int layers, int stages, size_t most, std::vector<std::vector<int>>& out) {
  std::vector<int> counts;
  std::function<bool(int, int)> place = [&](int left, int stages_left) {
    if (stages_left == 1) {
      counts.push_back(left);
      out.push_back(counts);
      counts.pop_back();
      return out.size() <= most;
    }
    for (int n = 1; n <= left - (stages_left - 1); ++n) {
      counts.push_back(n);
      const bool more = place(left - n, stages_left - 1);
      counts.pop_back();
      if (!more) return false;
    }
    return true;
  };
  return layers >= stages && place(layers, stages);
}

// What one configuration is planned with, apart from its split.
struct Setting {
  Setting(const graph::Model& m, const LayoutCosts& c, const schedule::Schedule& s)
      : model(m), costs(c), sched(s) {}
  const graph::Model& model;
  const LayoutCosts& costs;
  const schedule::Schedule& sched;
  std::vector<int> in_flight;
  std::vector<int> stage_group;  // the group of every stage
  int groups = 1;
  int spatial = 1;
  bool recompute = false;
  uint64_t budget = 0;  // bytes per device; 0: none
  int cores = 1;
  int threads = 1;
  double efficiency = 1;  // PlanCosts::core_efficiency
  TransportCosts transport;
  bool in_process = true;              // PlanCosts::in_process
  std::vector<double> gradient_bytes;  // of every layer's weights (fp32, as they are summed)
};

// The bytes of each layer's weight gradients.
std::vector<double> gradient_bytes(const graph::Model& model) {
  std::vector<double> out;
  for (const graph::Layer& l : model.layers) {
    double bytes = 0;
    for (const auto& p : graph::named_parameters(l)) bytes += 4.0 * p.second.numel();
    out.push_back(bytes);
  }
  return out;
}

// What layer `l`'s exchanges with the other slabs take in its forward and in its backward (0
// on whole samples).
std::pair<double, double> exchange_seconds(const Setting& s, size_t l) {
  const runtime::LayerTimes& t = s.costs.times;
  if (t.forward_exchanges.empty()) return {0.0, 0.0};
  return {s.transport.seconds(s.spatial, t.forward_exchanges[l], t.forward_exchange_bytes[l]),
          s.transport.seconds(s.spatial, t.backward_exchanges[l], t.backward_exchange_bytes[l])};
}

// A split's planned peaks and step time.
struct Evaluated {
  std::vector<double> device_peak;     // at most
  std::vector<double> device_planned;  // without what late receivers may leave
  std::vector<double> device_state;
  double peak = 0;
  bool fits = true;
  double step = 0;
};

Evaluated evaluate(const Setting& s, const graph::Partition& partition) {
  const int stages = partition.num_stages;
  const graph::Flow flow = graph::analyze(s.model, partition);
  const schedule::StageGraph graph{stages, flow.consumers()};
  const schedule::Schedule lowered = schedule::lower(s.sched, graph);
  const std::vector<double> at_most =
      runtime::stage_peaks(s.model, s.costs.bytes, partition, s.in_flight, s.recompute, &lowered);
  const std::vector<double> planned =
      runtime::planned_peaks(s.model, s.costs.bytes, partition, s.in_flight, s.recompute, &lowered);
  Evaluated e;
  e.device_peak.assign(static_cast<size_t>(s.groups), 0.0);
  e.device_planned.assign(static_cast<size_t>(s.groups), 0.0);
  e.device_state.assign(static_cast<size_t>(s.groups), 0.0);
  // Where the schedule runs on the groups themselves (one stage each, or its own placement of
  // several), each group's peak as it runs its actions in order; else (more stages than
  // groups, placed round-robin) the sum of its stages' peaks.
  const bool on_groups = lowered.num_devices == s.groups;
  if (on_groups) {
    e.device_peak = runtime::device_peaks(s.model, s.costs.bytes, partition, s.recompute, lowered);
    e.device_planned =
        runtime::device_peaks(s.model, s.costs.bytes, partition, s.recompute, lowered, false);
  }
  for (int k = 0; k < stages; ++k) {
    const size_t g = static_cast<size_t>(s.stage_group[static_cast<size_t>(k)]);
    if (!on_groups) {
      e.device_peak[g] += at_most[static_cast<size_t>(k)];
      e.device_planned[g] += planned[static_cast<size_t>(k)];
    }
    auto [begin, end] = partition.layers_of(k);
    for (int l = begin; l < end; ++l)
      e.device_state[g] += static_cast<double>(s.costs.bytes.state[static_cast<size_t>(l)]);
  }
  e.peak = *std::max_element(e.device_peak.begin(), e.device_peak.end());
  e.fits = s.budget == 0 || e.peak <= static_cast<double>(s.budget);
  // The schedule on the stages' summed times; a recomputing stage runs its forward again
  // before each backward (before the input half of a split one). A forward takes the messages
  // its stage receives, each sending stage's wait once and every byte's copy; a backward the
  // gradients of what its stage sent. On slabs each layer takes its exchanges with the group.
  const runtime::LayerTimes& t = s.costs.times;
  const TransportCosts& tr = s.transport;
  auto received = [&](const std::vector<graph::Crossing>& crossings, bool inputs) {
    std::set<int> peers;
    double bytes = 0;
    for (const graph::Crossing& x : crossings) {
      const int peer = inputs ? x.from_stage : x.to_stage;
      if (peer < 0) continue;  // the graph's input
      peers.insert(peer);
      const auto it = s.costs.bytes.tensors.find(x.tensor);
      if (it != s.costs.bytes.tensors.end()) bytes += static_cast<double>(it->second);
    }
    return tr.seconds(2, static_cast<int>(peers.size()), bytes);
  };
  schedule::Costs step;
  for (int k = 0; k < stages; ++k) {
    auto [begin, end] = partition.layers_of(k);
    double f = received(flow.inputs[static_cast<size_t>(k)], true);
    double b = received(flow.outputs[static_cast<size_t>(k)], false), i = b, w = 0;
    for (int l = begin; l < end; ++l) {
      const size_t x = static_cast<size_t>(l);
      const auto [fx, bx] = exchange_seconds(s, x);
      f += t.forward[x] + fx;
      b += t.backward[x] + bx;
      i += t.input[x] + bx;
      w += t.weight[x];
    }
    step.forward.push_back(f);
    step.backward.push_back(b + (s.recompute ? f : 0));
    step.input.push_back(i + (s.recompute ? f : 0));
    step.weight.push_back(w);
  }
  // Before its first action every device's weight gradients are zeroed: in process by one
  // thread, every device's (each slab's copy too) one after another before any device starts;
  // under MPI each rank its own. Then every device sums each of its stages' weight gradients
  // over the ranks of its data-parallel group, stage by stage (under MPI), and steps its
  // optimizer over them.
  const size_t devices = static_cast<size_t>(s.sched.num_devices);
  std::vector<double> zeroed(devices, 0.0), sums(devices, 0.0), optimizer(devices, 0.0);
  for (int k = 0; k < stages; ++k) {
    const size_t d = static_cast<size_t>(s.sched.stage_device[static_cast<size_t>(k)]);
    auto [begin, end] = partition.layers_of(k);
    double bytes = 0;
    for (int l = begin; l < end; ++l) {
      if (!t.step.empty()) optimizer[d] += t.step[static_cast<size_t>(l)];
      if (!t.zero.empty()) zeroed[d] += t.zero[static_cast<size_t>(l)];
      bytes += s.gradient_bytes[static_cast<size_t>(l)];
    }
    sums[d] += tr.all_reduce_seconds(s.spatial, bytes);
  }
  if (s.in_process)
    zeroed.assign(devices, s.spatial * std::accumulate(zeroed.begin(), zeroed.end(), 0.0));
  e.step = contended_step(schedule::compute_only(s.sched), graph, step, zeroed, sums, optimizer,
                          s.spatial, s.threads, s.cores, s.efficiency);
  return e;
}

// Better: fits where the other does not, then faster, then leaner.
bool better(const Evaluated& a, const Evaluated& b) {
  if (a.fits != b.fits) return a.fits;
  if (a.step != b.step) return a.step < b.step;
  return a.peak < b.peak;
}

// The splits a configuration tries: the given one (--balance); every contiguous split while
// there are at most kEverySplit of them; else the one whose costliest stage (time) is least
// among those whose every stage fits its share of the budget (runtime::partition_to_fit on
// seconds). That pruning is argued here: in a step each micro-batch passes every stage, so a
// stage of time T holds the pipeline for m x T while the others only fill and drain it; the
// split with the least costliest stage minimizes the term that grows with the micro-batches,
// and the simulator then judges it with the rest. Both agree on small cases
// (tests/train/planner_test.cc holds the exhaustive search against it).
std::vector<graph::Partition> splits_to_try(const Config& base, const Setting& s, int stages,
                                            size_t most_splits) {
  const graph::Model& model = s.model;
  if (!base.balance.empty()) return {graph::partition_by_balance(model, base.balance)};
  std::vector<std::vector<int>> all;
  if (most_splits > 0 &&
      contiguous_splits(static_cast<int>(model.layers.size()), stages, most_splits, all)) {
    std::vector<graph::Partition> out;
    for (const std::vector<int>& counts : all)
      out.push_back(graph::partition_by_balance(model, counts));
    return out;
  }
  // A stage's share of the budget: the budget over the most stages one device holds.
  std::map<int, int> per_group;
  int most = 1;
  for (int g : s.stage_group) most = std::max(most, ++per_group[g]);
  const double stage_budget =
      s.budget > 0 ? static_cast<double>(s.budget) / most : std::numeric_limits<double>::max();
  const runtime::LayerTimes& t = s.costs.times;
  std::vector<double> layer_seconds;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const auto [fx, bx] = exchange_seconds(s, l);
    layer_seconds.push_back((t.forward[l] + fx) * (s.recompute ? 2 : 1) + t.backward[l] + bx);
  }
  const schedule::Schedule chain = schedule::lower(s.sched, schedule::StageGraph::chain(stages));
  return {runtime::partition_to_fit(model, s.costs.bytes, s.in_flight, s.recompute, stage_budget,
                                    &chain, &layer_seconds, runtime::kTimeSlack)};
}

// One configuration planned on its layout's costs.
PlannedRun plan_one(const Config& base, const graph::Model& model, const PlanSpace& space,
                    const LayoutCosts& costs, int spatial, int microbatches,
                    const std::string& name, bool recompute, int cores, const PlanCosts& measured,
                    const std::vector<double>& gradients) {
  PlannedRun run;
  Config& c = run.config;
  c = base;
  c.precision = costs.precision;
  c.spatial = spatial;
  c.microbatches = microbatches;
  c.schedule = name;
  c.recompute = recompute;
  // Virtual stages belong to the schedule that takes them; the others run with none.
  c.virtual_stages =
      schedule::schedule_kind(name).stages_per_device == 0 ? space.virtual_stages : 1;
  const int groups = space.devices / spatial;
  const bool chunked = schedule::places_own_stages(name);
  const int stages = chunked ? groups * schedule::stages_per_device(name, c.virtual_stages)
                     : !base.balance.empty() ? static_cast<int>(base.balance.size())
                     : base.stages > 0       ? base.stages
                                             : groups;
  if (chunked) c.stages = 0;
  run.flags = configuration_flags(c);
  auto refuse = [&](const std::string& why) {
    run.fits = false;
    run.why_not = why;
    return run;
  };
  if (chunked && base.stages > 0 && base.stages != stages)
    return refuse(
        fmt::format("--stages {} is given, and {} places {} stages on {} groups of devices",
                    base.stages, name, stages, groups));
  if (stages < groups)
    return refuse(fmt::format("{} stages leave {} groups of devices idle", stages, groups));
  if (stages > static_cast<int>(model.layers.size()))
    return refuse(fmt::format("{} stages for {} layers", stages, model.layers.size()));
  schedule::Options o;
  o.stages = chunked ? groups : stages;
  o.microbatches = microbatches;
  o.virtual_stages = c.virtual_stages;
  schedule::Schedule sched;
  try {
    sched = schedule::make(name, o);
  } catch (const Error& e) {
    return refuse(e.what());
  }
  Setting s(model, costs, sched);
  s.in_flight = schedule::peak_in_flight(sched);
  // As the pipeline places them: the schedule's own placement, or stage k on group k mod groups.
  s.stage_group = sched.stage_device;
  if (!chunked)
    for (int k = 0; k < stages; ++k) s.stage_group[static_cast<size_t>(k)] = k % groups;
  s.groups = groups;
  s.spatial = spatial;
  s.recompute = recompute;
  s.budget = base.device_memory;
  s.cores = cores;
  s.threads = std::max(1, base.threads_per_device);
  s.efficiency = measured.core_efficiency;
  s.transport = measured.transport;
  s.in_process = measured.in_process;
  s.gradient_bytes = gradients;
  std::optional<std::pair<graph::Partition, Evaluated>> best;
  for (const graph::Partition& split : splits_to_try(base, s, stages, space.every_split)) {
    Evaluated e = evaluate(s, split);
    if (!best || better(e, best->second)) best.emplace(split, std::move(e));
  }
  c.balance = best->first.balance();
  if (c.balance.size() == 1) c.balance.clear();
  c.partition = PartitionBy::kParameters;  // --balance gives the split
  run.flags = configuration_flags(c);
  run.device_peak = best->second.device_peak;
  run.device_planned = best->second.device_planned;
  run.device_state = best->second.device_state;
  run.peak = best->second.peak;
  run.fits = best->second.fits;
  run.step_seconds = best->second.step;
  run.samples_per_s =
      run.step_seconds > 0 ? static_cast<double>(base.batch) * base.replicas / run.step_seconds : 0;
  return run;
}

}  // namespace

PlanSpace plan_space(const Config& c, const graph::Model& model, const Source& source,
                     const std::set<std::string>& fixed) {
  const std::vector<DeviceSpec> devices = parse_devices(c.devices, c.threads_per_device);
  for (const DeviceSpec& d : devices)
    TANDEM_CHECK(d.device.is_cpu(),
                 "the planner measures each layer on the CPU, so it plans CPU devices only, not "
                 "{}; plan the same model on as many CPU devices, or give the layout yourself",
                 d.name);
  auto is_fixed = [&](const std::string& field) { return fixed.count(field) > 0; };
  PlanSpace space;
  space.devices = static_cast<int>(devices.size());
  const int64_t depth = depth_of(model, source);
  if (is_fixed("spatial")) {
    space.spatial = {c.spatial};
  } else {
    for (int s = 1; s <= space.devices; ++s)
      if (space.devices % s == 0 && slabs_cut(model, depth, s)) space.spatial.push_back(s);
  }
  if (is_fixed("microbatches")) {
    space.microbatches = {c.microbatches};
  } else {
    for (int m = 1; m <= std::min(c.batch, kMostMicrobatches); ++m)
      if (c.batch % m == 0 && (source.test_size() == 0 || source.test_size() >= m))
        space.microbatches.push_back(m);
  }
  if (is_fixed("schedule")) {
    space.schedules = {c.schedule};
  } else {
    for (const std::string& name : schedule::schedule_names())
      if (trains(name)) space.schedules.push_back(name);
  }
  space.recompute =
      is_fixed("recompute") ? std::vector<bool>{c.recompute} : std::vector<bool>{false, true};
  if (is_fixed("virtual_stages")) space.virtual_stages = c.virtual_stages;
  space.precisions = {c.precision};
  if (!is_fixed("precision")) {
    // bf16 where every device's kernels compute it here; fp16 needs CUDA devices.
    space.precisions = {Precision::kFp32};
    bool bf16 = true;
    for (const DeviceSpec& d : devices)
      bf16 &= graph::reduced_precision_refusal(d.device, c10::kBFloat16).empty();
    if (bf16) space.precisions.push_back(Precision::kBf16);
  }
  return space;
}

const PlannedRun* Planning::chosen() const {
  return !runs.empty() && runs.front().fits ? &runs.front() : nullptr;
}

Planning plan_search(const Config& c, const graph::Model& model, const PlanSpace& space,
                     const PlanCosts& costs, int cores) {
  Planning p;
  p.measure_seconds = costs.seconds;
  p.layouts = static_cast<int>(costs.layouts.size());
  p.core_efficiency = costs.core_efficiency;
  p.transport = costs.transport;
  const std::vector<Precision> precisions =
      space.precisions.empty() ? std::vector<Precision>{c.precision} : space.precisions;
  const std::vector<double> gradients = gradient_bytes(model);
  for (Precision precision : precisions)
    for (int s : space.spatial)
      for (int m : space.microbatches)
        for (const std::string& name : space.schedules)
          for (bool recompute : space.recompute)
            p.runs.push_back(plan_one(c, model, space, costs.of(s, micro_of(c.batch, m), precision),
                                      s, m, name, recompute, cores, costs, gradients));
  // Fitting, fastest first (the leaner of two as fast); then over the budget, leanest first;
  // then those that cannot run. Stable: ties keep the space's order.
  auto rank = [](const PlannedRun& r) { return !r.why_not.empty() ? 2 : r.fits ? 0 : 1; };
  std::stable_sort(p.runs.begin(), p.runs.end(), [&](const PlannedRun& a, const PlannedRun& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (rank(a) == 0 && a.samples_per_s != b.samples_per_s)
      return a.samples_per_s > b.samples_per_s;
    return a.peak < b.peak;
  });
  return p;
}

Planning plan(const Config& c, const graph::Model& model, const Source& source,
              const std::set<std::string>& fixed, int repeats, Job* job) {
  const PlanSpace space = plan_space(c, model, source, fixed);
  const PlanCosts costs = measure_plan_costs(c, model, source, space, repeats, job);
  Planning p =
      plan_search(c, model, space, costs, job ? job_cores(*job, c.replicas) : available_cores());
  if (job && job->mpi()) p.ranks = job->world();
  return p;
}

}  // namespace tandem::train
