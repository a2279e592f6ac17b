// Stages by measured memory for Trainer (--partition memory | fit), and what the memory plan
// says about a --device-memory budget.
#pragma once

#include <string>
#include <vector>

#include "tandem/common/device.h"
#include "tandem/graph/partition.h"
#include "tandem/runtime/layer_times.h"
#include "tandem/runtime/memory_plan.h"
#include "tandem/runtime/pipeline.h"
#include "tandem/train/config.h"
#include "tandem/train/run_plan.h"
#include "tandem/train/source.h"

namespace tandem::train {

struct MemoryPartition {
  graph::Partition partition;
  std::string plan;             // runtime::memory_plan_table
  std::vector<double> planned;  // the planned peak of every stage
  // Where the schedule places its own stages, several per device group: each group's peak as
  // it runs their actions in turn (runtime::device_peaks); else empty.
  std::vector<double> group_planned;
  runtime::LayerBytes bytes;  // the measurement planned from (a slab's under a spatial split)
};

// What a memory plan is made from: the model, its options and data, the device that leads
// each group of one replica (the largest slab's), and where the run is.
struct PlanInputs {
  const graph::Model& model;
  const Config& config;
  const Source& source;
  std::vector<DeviceSpec> devices;
  bool per_rank = false;  // under MPI: each rank's memory its own
  Job* job = nullptr;     // measures once for the job (null: this process alone)
};

// One micro-batch of `in`'s layout (config.spatial, the largest micro-batch of config.batch in
// config.microbatches) measured as the memory plan measures it: its bytes per layer
// (runtime::measure_layer_bytes) and its times per layer (runtime::measure_layer_times, with
// the first device's threads). Under a spatial split, the slab that holds the most. One process
// of `in.job` measures; every process returns its numbers.
runtime::LayerBytes measure_bytes(const PlanInputs& in);
// `whole`: also the split backward's halves (the planner's); else the forward and backward
// alone. `warm_up`: false leaves the layers' untimed first round out
// (runtime::measure_layer_times), for a layout measured before.
runtime::LayerTimes measure_times(const PlanInputs& in, int repeats, bool whole = true,
                                  bool warm_up = true);
// Seconds of the optimizer's step over each layer's parameters (runtime::LayerTimes::step) and
// of zeroing their gradients (LayerTimes::zero), the mean of `repeats` after a warm-up, with the
// first device's threads: the same for every layout. One process of `in.job` measures; every
// process returns its numbers.
struct OptimizerTimes {
  std::vector<double> step, zero;
};
OptimizerTimes measure_optimizer_steps(const PlanInputs& in, int repeats);

// What a stage spends on each layer per micro-batch, for --partition time: on CPU devices the
// measured seconds (measure_times, 3 repetitions) of its forward, twice under --recompute, and
// of its backward (a run that only evaluates: its forward); on CUDA devices, which this process
// does not time, the forward FLOPs the layers declare, or, where none declares any, their
// parameter counts plus one.
struct LayerCosts {
  std::vector<double> per_layer;
  bool seconds = false;  // per_layer holds seconds
  std::string what;      // the words for what per_layer holds
};
LayerCosts layer_costs(const PlanInputs& in);

// The line that says how a split by `costs` shares them: "split by ...: the stages take ...".
std::string split_line(const graph::Partition& partition, const LayerCosts& costs);

// The stages under the schedule that will run (runtime/memory_plan.h) and their plan: `given`
// (a split to plan, e.g. from --balance), or when it is null the smallest largest planned peak
// (--partition memory), or among the splits whose plan fits --device-memory the most even FLOPs
// (--partition fit) or `costs` (--partition time, given them).
MemoryPartition memory_partition(const PlanInputs& in, int stages,
                                 const graph::Partition* given = nullptr,
                                 const LayerCosts* costs = nullptr);

// Under a spatial split (config.spatial > 1): the table of a slab's bytes against one device's
// on the same voxels (runtime::slab_bytes_table), `slab` being memory_partition's measurement;
// it measures the same planes once more as whole samples.
std::string slab_accounting(const PlanInputs& in, const runtime::LayerBytes& slab);

// A larger --spatial under which the same stages would fit --device-memory: each device then
// plans a thinner slab of every activation.
struct SpatialFit {
  int spatial = 0;   // 0: none up to the most slabs the depth allows fits
  double bytes = 0;  // the largest planned bytes of one group's stages under it
};

// Plans the stages of `partition` with --spatial N for N from config.spatial + 1 up to the most
// slabs `depth` allows (at most 16), stage s on group s mod `groups`, and returns the first N
// whose every group fits config.device_memory. Measures a slab of each N as memory_partition
// does.
SpatialFit spatial_that_fits(const PlanInputs& in, int stages, int groups,
                             const graph::Partition& partition, int64_t depth);

// The largest planned bytes of one group, stage s on group s mod `groups`.
double largest_group_bytes(const std::vector<double>& planned, int groups);

struct BudgetVerdict {
  bool fits = true;
  std::string line;  // "planned peaks fit ..." or "warning: stage 1 on cpu:1 plans ..."
};

// Whether the planned peaks fit a budget of `budget` bytes per memory, or which stages and
// memory do not: stage s on the group `stage_group[s]` of `slabs` devices of `devices`.
// `unit` names what `planned` lists in the warning: "stage", or "device group" for the peaks of
// groups that run several stages in turn.
BudgetVerdict budget_verdict(const std::vector<double>& planned,
                             const std::vector<DeviceSpec>& devices,
                             const std::vector<int>& stage_group, int slabs, uint64_t budget,
                             bool per_rank, const std::string& unit = "stage");

}  // namespace tandem::train
