// The plan of a training run: everything decided before anything is built. plan_run validates
// a whole Config against its model and data and decides what can refuse the run (stages,
// partition, slabs, the memory plan and its budget, the stage -> device map, the steps) without
// a pipeline, threads or the run's tensors; Trainer then builds from the plan. Every value the
// run derives from its options is derived here, once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/graph/partition.h"
#include "tandem/runtime/pipeline.h"
#include "tandem/train/config.h"
#include "tandem/train/source.h"

namespace tandem::train {

class Job;

// Runs `make` once for `job` (Job::once) and returns its text on every process; `job` null:
// make(), in this process alone.
std::string once_for_the_job(Job* job, const std::function<std::string()>& make);

// Where the run happens, as far as its plan depends on it.
struct PlanPlace {
  // Under MPI: each rank's memory is its own (a GPU shared by ranks is capped per rank).
  bool per_rank = false;
  // The job whose rank 0 measures the memory plan's layers for every rank; null: this process
  // alone.
  Job* job = nullptr;
};

struct RunPlan {
  // The pipeline to build, transport aside: devices, slabs, the stage -> device (group) map
  // where it is not one stage per device, schedule, micro-batches, budget.
  runtime::PipelineOptions pipeline;
  graph::Partition partition;
  int groups = 1;  // device groups of one replica: the devices, or groups of `spatial`
  int stages = 1;  // pipeline stages (several per group under interleaved and zb-v)
  std::vector<int> stage_group;  // the group of every stage, as the pipeline will place it
  int64_t depth = 0;             // a sample's planes along the model's slab dimension (0: none)
  int64_t global_batch = 0;      // samples per step over all replicas
  int64_t steps_per_epoch = 0;   // whole global batches in the training set
  int64_t total_steps = 0;       // the run's last step: Config::steps, or epochs x steps_per_epoch
  runtime::OptimizerFactory optimizer;
  // How --partition time shared the measured costs among the stages (a line); else empty.
  std::string split;
  // With --partition memory or fit, or --plan-only: the planned peak of every stage and the
  // plan's text (runtime::memory_plan_table, the slab table under --spatial, the budget's
  // verdict and, over the budget, a --spatial that fits); else empty.
  std::vector<double> planned;
  // Where the schedule places several stages on each device group (interleaved, zb-v): each
  // group's peak as it runs its stages' actions in turn (runtime::device_peaks), which the
  // budget's verdict reads instead of the sum of the stages' peaks; else empty.
  std::vector<double> group_planned;
  std::string memory_plan;
  bool fits = true;  // false: a stage's planned peak exceeds Config::device_memory
};

// The checks of `c` that need neither model nor data (batch, micro-batches, learning-rate
// schedule, epochs or steps, --resume and --init-from, the save folder); plan_run makes them
// first, and the trainer before it reads any data.
void check_config(const Config& c);

// Plans `c` for `model` (built for `source`'s samples) and `source` (its headers read; the
// samples are not needed). Throws tandem::Error, with the options' words, for a configuration
// that cannot run: every check of a Config happens here.
RunPlan plan_run(const Config& c, const graph::Model& model, const Source& source,
                 const PlanPlace& place = {});

}  // namespace tandem::train
