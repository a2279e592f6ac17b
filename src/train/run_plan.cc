#include "tandem/train/run_plan.h"

#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <filesystem>

#include "input_fits.h"
#include "memory_partition.h"
#include "tandem/checkpoint/all.h"
#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/precision.h"
#include "tandem/memory/bytes.h"
#include "tandem/schedule/generators.h"
#include "tandem/schedule/registry.h"
#include "tandem/spatial/slabs.h"
#include "tandem/train/catalog.h"
#include "tandem/transport/faulty.h"

namespace tandem::train {

namespace {

// The models of the catalog that take volumes, for messages.
std::string volume_models(const Config& c) {
  return one_of(models_that(c, [](const ModelNeeds& n) { return n.volumes; }));
}

// The devices' groups of a spatial split (--spatial N: N devices each), or the devices without
// one. `depth`: the planes of a sample along the model's slab dimension. Refuses, with the
// options' words, what cannot be cut.
int spatial_groups(const graph::Model& model, const Config& c, int devices, int64_t depth) {
  TANDEM_CHECK(c.spatial >= 1, "Config::spatial must be at least 1, not {}", c.spatial);
  if (c.spatial == 1) return devices;
  TANDEM_CHECK(model.slab_refusal.empty(),
               "Config::spatial = {} cuts every sample into depth slabs, but {}: use "
               "Config::spatial = 1 and "
               "split its layers across devices",
               c.spatial, model.slab_refusal);
  TANDEM_CHECK(
      model.slab_dim >= 0,
      "Config::spatial = {} cuts every sample's volume into slabs, but model {} has no volume: "
      "use Config::model = {}",
      c.spatial, c.model, volume_models(c));
  TANDEM_CHECK(
      devices % c.spatial == 0,
      "Config::spatial = {} runs every stage on a group of {} devices, but {} devices make no "
      "whole groups: give a multiple of {} devices",
      c.spatial, c.spatial, devices, c.spatial);
  const int64_t multiple = model.slab_multiple;
  if (depth >= multiple && depth % multiple != 0) {
    const int64_t below = depth / multiple * multiple, above = below + multiple;
    const int64_t least = c.spatial * multiple;
    TANDEM_CHECK(false,
                 "Config::volume = {} with model {} and Config::spatial = {}: every slab holds a "
                 "multiple of {} planes (the model's poolings and windows ask for them), and {} "
                 "is not one; use Config::volume = {}",
                 depth, c.model, c.spatial, multiple, depth,
                 below >= least ? fmt::format("{} or {}", below, above)
                                : fmt::format("{} or more", std::max(above, least)));
  }
  const int most = spatial::most_slabs(depth, multiple);
  if (most < c.spatial) {
    // A slab of several planes: the model's poolings ask for them.
    const std::string why = multiple > 1 ? fmt::format(" with model {}", c.model) : std::string();
    TANDEM_CHECK(
        false,
        "Config::volume = {}{} and Config::spatial = {}: {} slabs of at least {} plane{} need a "
        "depth "
        "of at least {}; use Config::volume = {} or more{}",
        depth, why, c.spatial, c.spatial, multiple, multiple == 1 ? "" : "s", c.spatial * multiple,
        c.spatial * multiple,
        most >= 1 ? fmt::format(", or Config::spatial = {} or fewer", most) : std::string());
  }
  return devices / c.spatial;
}

runtime::OptimizerFactory make_optimizer(const Config& c) {
  TANDEM_CHECK(c.lr > 0, "Config::lr must be positive, not {}", c.lr);
  switch (c.optimizer) {
    case OptimizerKind::kAdam:
      return [lr = c.lr](
                 std::vector<torch::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
        return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
      };
    case OptimizerKind::kSgd:
      TANDEM_CHECK(c.momentum >= 0 && c.momentum < 1, "Config::momentum must be in [0, 1), not {}",
                   c.momentum);
      return [lr = c.lr, m = c.momentum](
                 std::vector<torch::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
        return std::make_unique<torch::optim::SGD>(params,
                                                   torch::optim::SGDOptions(lr).momentum(m));
      };
  }
  TANDEM_CHECK(false, "Config::optimizer = {} is unknown; use adam or sgd",
               static_cast<int>(c.optimizer));
  return {};
}

// --resume takes folders: a file there is most likely a state dict meant for --init-from.
void check_resume_path(const std::string& resume) {
  if (resume.empty()) return;
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(resume, ec);
  TANDEM_CHECK(
      std::filesystem::exists(status),
      "Config::resume = {}: no such folder; give the save folder of an earlier run (its latest "
      "checkpoint) or one step-N checkpoint in it",
      resume);
  TANDEM_CHECK(
      std::filesystem::is_directory(status),
      "Config::resume = {}: that is not a folder; Config::resume takes a save folder or one step-N "
      "checkpoint in it and continues that run (optimizer and step included); to start "
      "a new run from the parameters of a state dict file, give it to Config::init_from",
      resume);
}

// A save folder that holds checkpoints belongs to another run unless this one continues it:
// saving into it would mix the two runs' checkpoints, or replace the other's without a word.
void check_save_dir(const Config& c) {
  TANDEM_CHECK(!c.overwrite || !c.save_dir.empty(),
               "Config::overwrite replaces the checkpoints of Config::save_dir, but no "
               "Config::save_dir is given");
  if (c.save_dir.empty() || c.overwrite || c.eval_only || c.plan_only) return;
  const std::vector<std::string> held = checkpoint::list_checkpoints(c.save_dir);
  if (held.empty()) return;
  if (!c.resume.empty()) {
    // The folder --resume continues: the save folder it names, or the one that holds the
    // step-N checkpoint it names.
    std::error_code ec;
    const std::filesystem::path from =
        std::filesystem::canonical(checkpoint::resolve_checkpoint(c.resume), ec);
    if (!ec && std::filesystem::equivalent(from.parent_path(), c.save_dir, ec)) return;
  }
  std::vector<std::string> names;
  for (const std::string& h : held) names.push_back(std::filesystem::path(h).filename().string());
  TANDEM_CHECK(false,
               "Config::save_dir = {} holds checkpoints of another run ({}); give Config::resume = "
               "{} to continue "
               "that run, Config::overwrite to replace its checkpoints with this run's, or another "
               "Config::save_dir",
               c.save_dir, fmt::join(names, ", "), c.save_dir);
}

// A training step runs every stage's backward: a schedule of forwards only (forward-only, what
// evaluation runs) cannot train, and would end the step with its micro-batches unfinished.
void check_schedule_trains(const Config& c, const RunPlan& p, bool chunked) {
  schedule::Options o;
  o.stages = chunked ? p.groups : p.stages;
  o.microbatches = c.microbatches;
  o.virtual_stages = c.virtual_stages;
  const schedule::Schedule s = schedule::make(c.schedule, o);
  for (const auto& actions : s.device_actions)
    for (const schedule::Action& a : actions)
      if (a.kind == schedule::Kind::kCompute && a.op != schedule::Op::kForward) return;
  std::vector<std::string> training;
  for (const std::string& name : schedule::schedule_names())
    if (name != c.schedule) training.push_back(name);
  TANDEM_CHECK(false,
               "Config::schedule = {} runs forwards only: a training step needs the backward; "
               "use another schedule ({}), or Config::eval_only to evaluate",
               c.schedule, fmt::join(training, ", "));
}

// What a memory plan of `p`'s groups is made from: each group planned on its first device, the
// largest slab's.
PlanInputs plan_inputs(const Config& c, const graph::Model& model, const Source& source,
                       const PlanPlace& place, const RunPlan& p) {
  PlanInputs in{model, c, source, {}, place.per_rank, place.job};
  for (int g = 0; g < p.groups; ++g) in.devices.push_back(p.pipeline.devices[g * c.spatial]);
  return in;
}

// The partition and, when one is made, the memory plan (p.stages, p.groups and p.pipeline's
// devices set).
void plan_partition(const Config& c, const graph::Model& model, const Source& source,
                    const PlanPlace& place, RunPlan& p) {
  TANDEM_CHECK(
      c.partition != PartitionBy::kFit || c.device_memory > 0,
      "Config::partition = fit chooses the most even compute among the splits whose plan fits "
      "Config::device_memory: give Config::device_memory");
  // Config::balance wins over the default (time) and over parameters, whose splits are cheap.
  TANDEM_CHECK(c.balance.empty() || c.partition == PartitionBy::kParameters ||
                   c.partition == PartitionBy::kTime,
               "Config::balance gives the layers per stage and Config::partition = {} computes "
               "them: give one of the two",
               name_of(c.partition));
  const PlanInputs in = plan_inputs(c, model, source, place, p);
  // Time is measured where it decides the split; under a budget the split is made with the
  // memory plan (memory_partition).
  const bool timed = c.balance.empty() && c.partition == PartitionBy::kTime && p.stages > 1;
  const LayerCosts costs = timed ? layer_costs(in) : LayerCosts{};
  const bool given = !c.balance.empty() || c.partition == PartitionBy::kParameters ||
                     (c.partition == PartitionBy::kTime && (p.stages == 1 || c.device_memory == 0));
  if (!c.balance.empty()) {
    p.partition = graph::partition_by_balance(model, c.balance);
  } else if (c.partition == PartitionBy::kParameters) {
    p.partition = graph::partition_by_parameters(model, p.stages);
  } else if (p.stages == 1) {
    p.partition = graph::partition_by_balance(model, {static_cast<int>(model.layers.size())});
  } else if (timed && c.device_memory == 0) {
    std::vector<double> prefix{0};
    for (double cost : costs.per_layer) prefix.push_back(prefix.back() + cost);
    p.partition = graph::partition_by_cost_evenly(
        model, p.stages, [&prefix](int, int b, int e) { return prefix[e] - prefix[b]; },
        costs.seconds ? runtime::kTimeSlack : 0);
  }
  if (timed && given) p.split = split_line(p.partition, costs);
  if (given && !c.plan_only) return;
  MemoryPartition m =
      memory_partition(in, p.stages, given ? &p.partition : nullptr, timed ? &costs : nullptr);
  p.partition = std::move(m.partition);
  if (timed && !given) p.split = split_line(p.partition, costs);
  p.memory_plan = std::move(m.plan);
  p.planned = std::move(m.planned);
  p.group_planned = std::move(m.group_planned);
  if (c.spatial > 1) p.memory_plan += slab_accounting(in, m.bytes);
}

// The group of every stage as the pipeline places it: p.pipeline.stage_device when given, as
// the schedule places its own stages (interleaved, zb-v), or stage s on group s.
std::vector<int> stage_groups(const Config& c, bool chunked, const RunPlan& p) {
  if (!p.pipeline.stage_device.empty()) return p.pipeline.stage_device;
  if (chunked) {
    schedule::Options o;
    o.stages = p.groups;
    o.microbatches = c.microbatches;
    o.virtual_stages = c.virtual_stages;
    return schedule::make(c.schedule, o).stage_device;
  }
  std::vector<int> identity(static_cast<size_t>(p.stages));
  for (int s = 0; s < p.stages; ++s) identity[static_cast<size_t>(s)] = s;
  return identity;
}

// With a memory plan and a budget: the verdict and, over the budget, whether thinner slabs of
// the same stages would fit (a model that slabs can cut, its stages one per group or
// round-robin).
void plan_budget(const Config& c, const graph::Model& model, const Source& source,
                 const PlanPlace& place, bool chunked, RunPlan& p) {
  if (p.planned.empty() || c.device_memory == 0) return;
  std::vector<int> groups(p.group_planned.size());
  for (size_t g = 0; g < groups.size(); ++g) groups[g] = static_cast<int>(g);
  const BudgetVerdict v =
      p.group_planned.empty()
          ? budget_verdict(p.planned, p.pipeline.devices, p.stage_group, c.spatial, c.device_memory,
                           place.per_rank)
          : budget_verdict(p.group_planned, p.pipeline.devices, groups, c.spatial, c.device_memory,
                           place.per_rank, "device group");
  p.memory_plan += v.line;
  p.fits = v.fits;
  if (v.fits || model.slab_dim < 0 || chunked ||
      largest_group_bytes(p.planned, p.groups) <= static_cast<double>(c.device_memory))
    return;
  const SpatialFit fit = spatial_that_fits(plan_inputs(c, model, source, place, p), p.stages,
                                           p.groups, p.partition, p.depth);
  if (fit.spatial > 0)
    p.memory_plan += fmt::format(
        "Config::spatial = {} would plan at most {} per device ({} devices: {} group{} of {}), "
        "within the budget\n",
        fit.spatial, memory::format_bytes(static_cast<uint64_t>(fit.bytes)), p.groups * fit.spatial,
        p.groups, p.groups > 1 ? "s" : "", fit.spatial);
}

// Config::faults: the skipped backwards, and the message faults as a transport::FaultyTransport
// around the run's transport. Throws for a fault it cannot read or that names no stage or
// micro-batch of the run.
void plan_faults(const Config& c, RunPlan& p) {
  std::vector<transport::Fault> message_faults;
  for (const std::string& text : c.faults) {
    const std::string kind = "skip-backward:";
    if (text.rfind(kind, 0) != 0) {
      message_faults.push_back(transport::parse_fault(text));
      continue;
    }
    int stage = -1, mb = -1;
    char tail = 0;
    const int read =
        std::sscanf(text.c_str() + kind.size(), "stage=%d,mb=%d%c", &stage, &mb, &tail);
    TANDEM_CHECK(read == 2 && stage >= 0 && stage < p.stages && mb >= 0 && mb < c.microbatches,
                 "fault '{}': give skip-backward:stage=S,mb=M with a stage from 0 to {} and a "
                 "micro-batch from 0 to {}",
                 text, p.stages - 1, c.microbatches - 1);
    p.pipeline.skip_backward.emplace_back(stage, mb);
  }
  if (message_faults.empty()) return;
  p.pipeline.wrap_transport = [message_faults](std::shared_ptr<transport::Transport> inner) {
    return std::make_shared<transport::FaultyTransport>(std::move(inner), message_faults);
  };
}

}  // namespace

namespace {

// --precision: bf16 where every device's kernels compute it; fp16 on CUDA devices.
void check_precision(const Config& c) {
  if (c.precision == Precision::kFp32) return;
  const c10::ScalarType type = compute_type(c.precision);
  for (const DeviceSpec& d : parse_devices(c.devices, c.threads_per_device)) {
    TANDEM_CHECK(c.precision != Precision::kFp16 || !d.device.is_cpu(),
                 "--precision fp16 needs CUDA devices, and {} is a CPU device: LibTorch's CPU "
                 "autocast computes in bf16, which has fp32's range and needs no loss scaling; "
                 "give --precision bf16 (with --cpu-kernels native) or --precision fp32",
                 d.name);
    const std::string why = graph::reduced_precision_refusal(d.device, type);
    TANDEM_CHECK(why.empty(), "--precision {}: the kernels of {} cannot compute in {} ({}){}",
                 name_of(c.precision), d.name, name_of(c.precision), why,
                 d.device.is_cpu() ? "; on CPU devices bf16 needs oneDNN's bf16 kernels, which "
                                     "--cpu-kernels portable caps away (AVX2 has none): give "
                                     "--cpu-kernels native on a processor with AVX-512 or AMX, or "
                                     "--precision fp32"
                                   : "");
  }
}

}  // namespace

void check_config(const Config& c) {
  TANDEM_CHECK(c.batch >= 1, "Config::batch must be at least 1, not {}", c.batch);
  TANDEM_CHECK(c.microbatches <= c.batch,
               "{} micro-batches cannot be cut from a batch of {} samples: use at most {} "
               "micro-batches or a larger Config::batch",
               c.microbatches, c.batch, c.batch);
  TANDEM_CHECK(c.epochs >= 1 || c.steps > 0, "give Config::epochs >= 1 or Config::steps > 0");
  TANDEM_CHECK(c.init_from.empty() || c.resume.empty(),
               "Config::init_from and Config::resume exclude each other: Config::resume continues "
               "a run (parameters, "
               "optimizer, step), Config::init_from starts a new one from parameters");
  check_resume_path(c.resume);
  check_save_dir(c);
  check_precision(c);
}

RunPlan plan_run(const Config& c, const graph::Model& model, const Source& source,
                 const PlanPlace& place) {
  check_config(c);
  check_input_fits(c, source, machine_memory_bytes());
  RunPlan p;
  p.optimizer = make_optimizer(c);
  runtime::PipelineOptions& po = p.pipeline;
  po.devices = parse_devices(c.devices, c.threads_per_device);
  po.schedule = c.schedule;
  po.microbatches = c.microbatches;
  po.virtual_stages = c.virtual_stages;
  po.replicas = c.replicas;
  po.seed = c.seed;
  po.recompute = c.recompute;
  po.precision = compute_type(c.precision);
  po.lend_idle_cores = c.lend_idle_cores;
  // A run that only plans trains nothing: the budget is what the plan is checked against.
  po.device_memory = c.plan_only ? 0 : c.device_memory;
  po.workspace_bound = graph::workspace_bound(c.device_memory);
  po.log_placement = c.log_placement;
  po.comm_timeout = std::chrono::milliseconds(static_cast<int64_t>(c.comm_timeout_s * 1000));
  // A sample's planes along the slab dimension (the batch dimension aside): the depth.
  const std::vector<int64_t> sample = source.input_shape();
  p.depth = model.slab_dim >= 1 && model.slab_dim <= static_cast<int>(sample.size())
                ? sample[static_cast<size_t>(model.slab_dim - 1)]
                : 0;
  p.groups = spatial_groups(model, c, static_cast<int>(po.devices.size()), p.depth);
  po.slabs = c.spatial;
  if (c.spatial > 1) po.slab_extent = p.depth;
  p.stages = c.stages > 0 ? c.stages : p.groups;
  if (!c.balance.empty()) p.stages = static_cast<int>(c.balance.size());
  // interleaved and zb-v place several stages on each device themselves: V per device, or 2.
  const bool chunked = schedule::places_own_stages(c.schedule);
  if (chunked) {
    const int per_device = schedule::stages_per_device(c.schedule, c.virtual_stages);
    const int want = p.groups * per_device;
    TANDEM_CHECK(c.stages == 0 || c.stages == want,
                 "{} on {} devices with {} stages per device has {} stages, not {}", c.schedule,
                 p.groups, per_device, want, c.stages);
    if (c.balance.empty()) p.stages = want;
  }
  if (!c.eval_only) check_schedule_trains(c, p, chunked);
  TANDEM_CHECK(source.test_size() == 0 || source.test_size() >= c.microbatches,
               "the held-out set has {} samples, too few for {} micro-batches: use "
               "Config::microbatches = {} or fewer",
               source.test_size(), c.microbatches, source.test_size());
  plan_partition(c, model, source, place, p);
  if (!chunked && p.stages != p.groups) {
    // More stages than devices: stage s on device s mod devices.
    TANDEM_CHECK(p.stages > p.groups,
                 "{} stages on {} devices{} leaves devices idle; give as many stages as devices",
                 p.stages, p.groups,
                 c.spatial > 1 ? fmt::format(" (groups of {})", c.spatial) : "");
    for (int s = 0; s < p.stages; ++s) po.stage_device.push_back(s % p.groups);
  }
  p.stage_group = stage_groups(c, chunked, p);
  plan_faults(c, p);
  plan_budget(c, model, source, place, chunked, p);
  p.global_batch = static_cast<int64_t>(c.batch) * c.replicas;
  p.steps_per_epoch = source.train_size() / p.global_batch;
  // A run that only plans or only evaluates takes no step.
  TANDEM_CHECK(c.plan_only || c.eval_only || p.steps_per_epoch >= 1,
               "a global batch of {} is larger than the {} training samples", p.global_batch,
               source.train_size());
  p.total_steps = c.steps > 0 ? c.steps : p.steps_per_epoch * c.epochs;
  return p;
}

}  // namespace tandem::train
