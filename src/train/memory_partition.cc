#include "memory_partition.h"

#include <ATen/Parallel.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "schedule/lower.h"
#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/memory/bytes.h"
#include "tandem/runtime/memory_plan.h"
#include "tandem/schedule/generators.h"
#include "tandem/schedule/registry.h"
#include "tandem/spatial/group.h"
#include "tandem/spatial/slabs.h"

namespace tandem::train {
namespace {

// Which memory the bytes of device `d` count against: a CPU device's own; a GPU's, shared by
// the devices of one process on it (its caching allocator caps them together); under MPI
// (`per_rank`) each rank's own.
std::string memory_of(const std::vector<DeviceSpec>& devices, int d, bool per_rank) {
  const DeviceSpec& spec = devices.at(d);
  if (!spec.device.is_cuda()) return spec.name;
  return per_rank ? fmt::format("{}@r{}", spec.device.str(), d) : spec.device.str();
}

// The most stages that count against one memory, with stage s on device s mod devices (as
// every layout places them: one per device, interleaved and zb-v chunks, more stages than
// devices).
int most_stages_per_memory(const std::vector<DeviceSpec>& devices, int stages, bool per_rank) {
  std::map<std::string, int> count;
  int most = 1;
  for (int s = 0; s < stages; ++s)
    most =
        std::max(most, ++count[memory_of(devices, s % static_cast<int>(devices.size()), per_rank)]);
  return most;
}

// One micro-batch of the first training samples as the measurement sees them: under a spatial
// split the planes of the slab that holds the most (spatial::heaviest_slab).
struct MeasuredSample {
  torch::Tensor input;
  uint64_t target = 0;         // bytes of the micro-batch's target (the slab's share on slabs)
  spatial::SlabLayout layout;  // c.spatial > 1: the cut, with the measured slab at `index`
  int index = 0;
  int slots = 0;  // the optimizer's tensors per parameter
  int step = 0;   // the tensors of a parameter's size its step makes for a moment
};

MeasuredSample measured_sample(const graph::Model& model, const Config& c, const Source& source) {
  MeasuredSample m;
  const int64_t micro = c.batch / c.microbatches + (c.batch % c.microbatches ? 1 : 0);
  const Batch batch = source.train_batch(0, 0, std::min<int64_t>(micro, source.train_size()));
  m.input = graph::fit_input(model, batch.input);
  const torch::Tensor& target = batch.target;
  if (target.defined()) m.target = static_cast<uint64_t>(target.numel() * target.element_size());
  m.slots = c.optimizer == OptimizerKind::kAdam ? 2 : (c.momentum != 0 ? 1 : 0);
  m.step = c.optimizer == OptimizerKind::kAdam ? 2 : 0;
  if (c.spatial == 1) return m;
  spatial::SlabLayout cut;
  cut.dim = model.slab_dim;
  cut.extent = m.input.size(model.slab_dim);
  cut.slabs = spatial::split_extent(cut.extent, c.spatial, model.slab_multiple);
  const spatial::HeaviestSlab heaviest = spatial::heaviest_slab(cut);
  m.layout = heaviest.layout;
  m.index = heaviest.index;
  const spatial::Slab& slab = m.layout.slabs[static_cast<size_t>(m.index)];
  m.input = m.input.narrow(m.layout.dim, slab.offset, slab.size).contiguous();
  // A target with the input's volume is cut as the input is (a segmentation's labels).
  if (target.defined() && target.dim() > m.layout.dim && target.size(m.layout.dim) == cut.extent)
    m.target = m.target / static_cast<uint64_t>(cut.extent) * static_cast<uint64_t>(slab.size);
  return m;
}

// Seconds of the optimizer's step over each layer's parameters (copies, with gradients of
// their size), and of zeroing those gradients, the mean of `repeats` after a warm-up, with
// `threads` threads. The mean, delays included, as a step meets them: the step runs the
// optimizer once, so a delay in one repetition counts once, not in every micro-batch as it
// would in a layer's time (runtime::LayerTimes).
OptimizerTimes optimizer_step_times(const graph::Model& model, const Config& c, int repeats,
                                    int threads) {
  const int threads_before = at::get_num_threads();
  at::set_num_threads(threads);
  set_blas_threads(threads);
  OptimizerTimes out;
  using Clock = std::chrono::steady_clock;
  auto mean = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  for (const graph::Layer& layer : model.layers) {
    std::vector<torch::Tensor> params;
    for (const auto& p : graph::named_parameters(layer)) {
      if (!p.second.requires_grad()) continue;
      torch::Tensor copy = p.second.detach().clone().requires_grad_(true);
      copy.mutable_grad() = torch::randn_like(copy);
      params.push_back(copy);
    }
    if (params.empty()) {
      out.step.push_back(0);
      out.zero.push_back(0);
      continue;
    }
    std::unique_ptr<torch::optim::Optimizer> opt;
    if (c.optimizer == OptimizerKind::kAdam)
      opt = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr));
    else
      opt = std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(c.lr).momentum(c.momentum));
    std::vector<double> steps, zeros;
    for (int r = 0; r <= repeats; ++r) {
      auto start = Clock::now();
      opt->step();
      const double step = std::chrono::duration<double>(Clock::now() - start).count();
      start = Clock::now();
      for (torch::Tensor& p : params) p.mutable_grad().zero_();
      const double zero = std::chrono::duration<double>(Clock::now() - start).count();
      if (r == 0) continue;
      steps.push_back(step);
      zeros.push_back(zero);
    }
    out.step.push_back(mean(steps));
    out.zero.push_back(mean(zeros));
  }
  at::set_num_threads(threads_before);
  return out;
}

// The group of a measured slab: its `slabs` members, none of them there (spatial/group.h).
spatial::Group dry_group(int slabs, const MeasuredSample& m) {
  std::vector<int> members(slabs);
  std::iota(members.begin(), members.end(), 0);
  return spatial::Group(nullptr, members, m.index, c10::kCPU, m.layout);
}

}  // namespace

std::string slab_accounting(const PlanInputs& in, const runtime::LayerBytes& slab) {
  TANDEM_ASSERT(in.config.spatial > 1, "slab accounting without a spatial split");
  auto measure = [&] {
    const MeasuredSample m = measured_sample(in.model, in.config, in.source);
    return runtime::to_json(runtime::measure_layer_bytes(
        in.model, m.input, m.slots, nullptr, m.step,
        graph::workspace_bound(in.config.device_memory), compute_type(in.config.precision)));
  };
  const runtime::LayerBytes whole =
      runtime::layer_bytes_from_json(once_for_the_job(in.job, measure));
  return runtime::slab_bytes_table(in.model, whole, slab);
}

runtime::LayerBytes measure_bytes(const PlanInputs& in) {
  const Config& c = in.config;
  // One process measures (under MPI rank 0; the others would repeat its work on the same
  // cores and memory) and every process plans from its numbers: the same partition everywhere.
  auto measure = [&] {
    const MeasuredSample m = measured_sample(in.model, c, in.source);
    runtime::LayerBytes bytes;
    if (c.spatial == 1) {
      bytes = runtime::measure_layer_bytes(in.model, m.input, m.slots, nullptr, m.step,
                                           graph::workspace_bound(c.device_memory),
                                           compute_type(c.precision));
    } else {
      // A spatial split: the slab that holds the most, with its halos (zeros from a dry group:
      // the same bytes as its neighbours' planes) and its share of every tensor.
      spatial::Group dry = dry_group(c.spatial, m);
      bytes = runtime::measure_layer_bytes(in.model, m.input, m.slots, &dry, m.step,
                                           graph::workspace_bound(c.device_memory),
                                           compute_type(c.precision));
    }
    bytes.target = m.target;
    return runtime::to_json(bytes);
  };
  return runtime::layer_bytes_from_json(once_for_the_job(in.job, measure));
}

runtime::LayerTimes measure_times(const PlanInputs& in, int repeats, bool whole, bool warm_up) {
  const Config& c = in.config;
  auto measure = [&] {
    const MeasuredSample m = measured_sample(in.model, c, in.source);
    const int threads = in.devices.empty() ? 1 : in.devices.front().threads;
    const int64_t bound = graph::workspace_bound(c.device_memory);
    runtime::LayerTimes t;
    if (c.spatial == 1) {
      t = runtime::measure_layer_times(in.model, m.input, nullptr, bound, repeats, threads,
                                       compute_type(c.precision), whole, warm_up);
    } else {
      spatial::Group dry = dry_group(c.spatial, m);
      t = runtime::measure_layer_times(in.model, m.input, &dry, bound, repeats, threads,
                                       compute_type(c.precision), whole, warm_up);
    }
    return runtime::to_json(t);
  };
  return runtime::layer_times_from_json(once_for_the_job(in.job, measure));
}

OptimizerTimes measure_optimizer_steps(const PlanInputs& in, int repeats) {
  auto measure = [&] {
    const int threads = in.devices.empty() ? 1 : in.devices.front().threads;
    const OptimizerTimes t = optimizer_step_times(in.model, in.config, repeats, threads);
    return nlohmann::json{{"step", t.step}, {"zero", t.zero}}.dump();
  };
  const nlohmann::json j = nlohmann::json::parse(once_for_the_job(in.job, measure));
  return {j.at("step").get<std::vector<double>>(), j.at("zero").get<std::vector<double>>()};
}

LayerCosts layer_costs(const PlanInputs& in) {
  const graph::Model& model = in.model;
  const Config& c = in.config;
  LayerCosts out;
  const bool cuda = std::any_of(in.devices.begin(), in.devices.end(),
                                [](const DeviceSpec& d) { return d.device.is_cuda(); });
  if (!cuda) {
    const runtime::LayerTimes t = measure_times(in, 3, /*whole=*/false);
    for (size_t l = 0; l < model.layers.size(); ++l)
      out.per_layer.push_back(c.eval_only ? t.forward[l]
                                          : t.forward[l] * (c.recompute ? 2 : 1) + t.backward[l]);
    out.seconds = true;
    out.what = c.eval_only ? "each layer's forward, measured on one micro-batch"
                           : "each layer's forward and backward, measured on one micro-batch";
    return out;
  }
  double flops = 0;
  for (const graph::Layer& l : model.layers) {
    out.per_layer.push_back(l.forward_flops_per_sample);
    flops += l.forward_flops_per_sample;
  }
  out.what = "the layers' forward FLOPs (CUDA devices are not timed)";
  if (flops > 0) return out;
  out.per_layer.clear();
  for (const graph::Layer& l : model.layers) {
    int64_t n = 1;
    for (const auto& p : graph::named_parameters(l)) n += p.second.numel();
    out.per_layer.push_back(static_cast<double>(n));
  }
  out.what = "parameter counts (CUDA devices are not timed and the layers declare no FLOPs)";
  return out;
}

std::string split_line(const graph::Partition& partition, const LayerCosts& costs) {
  const double total = std::accumulate(costs.per_layer.begin(), costs.per_layer.end(), 0.0);
  std::vector<std::string> shares;
  for (int s = 0; s < partition.num_stages; ++s) {
    auto [b, e] = partition.layers_of(s);
    const double sum =
        std::accumulate(costs.per_layer.begin() + b, costs.per_layer.begin() + e, 0.0);
    shares.push_back(costs.seconds
                         ? fmt::format("{:.0f}% ({:.2f} ms)", 100 * sum / total, 1e3 * sum)
                         : fmt::format("{:.0f}%", total > 0 ? 100 * sum / total : 0.0));
  }
  return fmt::format("split by time ({}): the stages take {}{}\n", costs.what,
                     fmt::join(shares, ", "), costs.seconds ? " per micro-batch" : "");
}

MemoryPartition memory_partition(const PlanInputs& in, int stages, const graph::Partition* given,
                                 const LayerCosts* costs) {
  const graph::Model& model = in.model;
  const Config& c = in.config;
  const std::vector<DeviceSpec>& devices = in.devices;
  schedule::Options o;
  const bool per_device = schedule::places_own_stages(c.schedule);
  o.stages = per_device ? static_cast<int>(devices.size()) : stages;
  o.microbatches = c.microbatches;
  o.virtual_stages = c.virtual_stages;
  const schedule::Schedule sched = schedule::make(c.schedule, o);
  const std::vector<int> in_flight = schedule::peak_in_flight(sched);
  TANDEM_CHECK(static_cast<int>(in_flight.size()) == stages,
               "schedule {} has {} stages but {} are asked for", c.schedule, in_flight.size(),
               stages);
  const runtime::LayerBytes bytes = measure_bytes(in);
  MemoryPartition out;
  out.bytes = bytes;
  // Messages ordered as the pipeline will order them: its lowering of this schedule. While
  // partitions are searched, on a chain of stages; for the chosen one, on its stage graph.
  const schedule::Schedule chain = schedule::lower(sched, schedule::StageGraph::chain(stages));
  if (given) {
    out.partition = *given;
  } else if (c.partition == PartitionBy::kFit || c.partition == PartitionBy::kTime) {
    // Stages that share a memory share its budget.
    const double stage_budget =
        static_cast<double>(c.device_memory) / most_stages_per_memory(devices, stages, in.per_rank);
    const bool timed = c.partition == PartitionBy::kTime && costs;
    out.partition = runtime::partition_to_fit(model, bytes, in_flight, c.recompute, stage_budget,
                                              &chain, timed ? &costs->per_layer : nullptr,
                                              timed && costs->seconds ? runtime::kTimeSlack : 0);
  } else {
    out.partition = runtime::partition_by_memory(model, bytes, in_flight, c.recompute, &chain);
  }
  const schedule::Schedule lowered = schedule::lower(
      sched, schedule::StageGraph{stages, graph::analyze(model, out.partition).consumers()});
  out.plan =
      runtime::memory_plan_table(model, bytes, out.partition, in_flight, c.recompute, &lowered);
  out.planned =
      runtime::planned_peaks(model, bytes, out.partition, in_flight, c.recompute, &lowered);
  if (per_device && lowered.num_devices == static_cast<int>(devices.size())) {
    // A device group's stages run in turn: its peak is not the sum of theirs.
    out.group_planned = runtime::device_peaks(model, bytes, out.partition, c.recompute, lowered);
    std::vector<std::string> each;
    for (double b : out.group_planned)
      each.push_back(memory::format_bytes(static_cast<uint64_t>(b)));
    out.plan +=
        fmt::format("each device group runs its stages in turn: at most {} (group 0 first)\n",
                    fmt::join(each, ", "));
  }
  // How even the compute is, where the schedule runs one device per device of the run.
  const auto forecast = runtime::flop_forecast(model, out.partition, sched);
  if (forecast && sched.num_devices == static_cast<int>(devices.size())) {
    out.plan += fmt::format(
        "from the FLOPs alone (B = 2F, messages free): a step takes {:.2f}x the time of its work "
        "spread evenly over the {} devices (bubble {:.2f})\n",
        forecast->slowdown, sched.num_devices, forecast->bubble);
  }
  return out;
}

double largest_group_bytes(const std::vector<double>& planned, int groups) {
  std::vector<double> sum(static_cast<size_t>(std::max(1, groups)), 0.0);
  for (size_t s = 0; s < planned.size(); ++s) sum[s % sum.size()] += planned[s];
  return *std::max_element(sum.begin(), sum.end());
}

SpatialFit spatial_that_fits(const PlanInputs& in, int stages, int groups,
                             const graph::Partition& partition, int64_t depth) {
  const int most = std::min(16, spatial::most_slabs(depth, in.model.slab_multiple));
  for (int n = in.config.spatial + 1; n <= most; ++n) {
    Config wider = in.config;
    wider.spatial = n;
    const PlanInputs thinner{in.model, wider, in.source, in.devices, in.per_rank, in.job};
    const MemoryPartition m = memory_partition(thinner, stages, &partition);
    const double bytes = largest_group_bytes(m.planned, groups);
    if (bytes <= static_cast<double>(in.config.device_memory)) return {n, bytes};
  }
  return {};
}

BudgetVerdict budget_verdict(const std::vector<double>& planned,
                             const std::vector<DeviceSpec>& devices,
                             const std::vector<int>& stage_group, int slabs, uint64_t budget,
                             bool per_rank, const std::string& unit) {
  std::map<std::string, double> bytes;  // by memory
  std::map<std::string, std::vector<int>> stages;
  for (size_t s = 0; s < planned.size(); ++s) {
    // A spatial group's first device: the largest slab.
    const std::string memory = memory_of(devices, stage_group.at(s) * slabs, per_rank);
    bytes[memory] += planned[s];
    stages[memory].push_back(static_cast<int>(s));
  }
  auto worst = std::max_element(bytes.begin(), bytes.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
  const std::string size = memory::format_bytes(static_cast<uint64_t>(worst->second));
  const std::string cap = memory::format_bytes(budget);
  if (worst->second <= static_cast<double>(budget))
    return {true, fmt::format("planned peaks fit Config::device_memory = {} (largest: {} on {})\n",
                              cap, size, worst->first)};
  const std::vector<int>& over = stages[worst->first];
  // The smallest budget this split fits, up to the next tenth of a MiB, as a budget is written.
  const double tenth = 0.1 * 1024 * 1024;
  const double enough = std::ceil(worst->second / tenth) * tenth;
  return {false,
          fmt::format("warning: {}{} {} on {} plan{} {}, above Config::device_memory = "
                      "{}: expect the first step to stop out of memory; this split fits "
                      "Config::device_memory = {:.1f}MiB or more, and Config::recompute, more "
                      "Config::microbatches or more devices plan less\n",
                      unit, over.size() > 1 ? "s" : "", fmt::join(over, ", "), worst->first,
                      over.size() > 1 ? "" : "s", size, cap, enough / (1024 * 1024))};
}

}  // namespace tandem::train
