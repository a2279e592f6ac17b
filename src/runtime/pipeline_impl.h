// The state behind runtime::Pipeline, shared by the files that implement it (an internal
// header of the runtime part).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core_share.h"
#include "executor.h"
#include "runtime/worker_pool.h"
#include "schedule/index.h"
#include "schedule/lower.h"
#include "schedule/replay.h"
#include "tandem/runtime/pipeline.h"
#include "tandem/runtime/placement_log.h"
#include "tandem/schedule/all.h"
#include "tandem/spatial/group.h"
#include "tandem/transport/transport.h"

namespace tandem::runtime {

struct Pipeline::Impl {
  graph::Model model;
  graph::Partition partition;
  PipelineOptions options;
  graph::Flow flow;
  schedule::StageGraph stage_graph;
  schedule::Schedule train_schedule;  // lowered
  schedule::Schedule eval_schedule;   // lowered, forward only
  std::vector<int> stage_device;      // stage -> device of the schedule (group of `slabs` devices)
  int pipeline_size = 0;              // devices of one replica: groups x slabs
  int groups = 0;                     // the schedule's devices
  int slabs = 1;
  spatial::SlabLayout layout;  // slabs > 1
  // The model each local device runs: `model` on the first local device of each group (the
  // lead, whose parameters the optimizer steps), copies on the others of one process.
  std::vector<graph::Model> copies;
  std::vector<const graph::Model*> device_model;             // by device of the pipeline
  std::vector<std::unique_ptr<spatial::Group>> slab_groups;  // by device (local, slabs > 1)
  int replica = 0;
  std::vector<int> local;  // devices of the pipeline this process runs
  std::vector<std::unique_ptr<DeviceContext>> contexts;  // by pipeline device (local only)
  std::shared_ptr<transport::Transport> transport;
  std::vector<std::unique_ptr<Executor>> executors;  // by pipeline device (local only)
  std::unique_ptr<WorkerPool> pool;
  std::unique_ptr<CoreShare> cores;  // set when several local CPU devices lend their cores
  std::vector<std::unique_ptr<torch::optim::Optimizer>> optimizers;  // by stage (local only)
  int64_t step = 0;
  int64_t runs = 0;         // forward_backward and evaluate calls so far: the next MessageKey::run
  double loss_scale = 1.0;  // set_loss_scale's
  std::vector<ActionTiming> timings;
  // The last step's start, and its phases after its actions on the local devices.
  TimePoint origin;
  std::vector<PhaseTiming> step_phases;
  // Runs job(w) on every local worker as run_on_workers does, and times each worker's call as a
  // phase of the step of kind `kind`.
  std::vector<std::exception_ptr> timed_on_workers(char kind, const std::function<void(int)>& job);
  std::unique_ptr<PlacementLog> placement_log;

  // Runs job(w) on every local device's worker w, in stream order with the calling thread on
  // GPUs: each worker's stream first waits for what the caller queued on its current stream of
  // that GPU, and afterwards the caller's current stream waits for each worker's. So inputs
  // made, and gradients or parameters read, on the caller's streams need no synchronize. The
  // waits are on the GPU; the host waits for nothing but the jobs. Returns their exceptions.
  std::vector<std::exception_ptr> run_on_workers(const std::function<void(int)>& job);
  schedule::Schedule build_schedule(const std::string& name, int microbatches) const;
  // The constructor's steps, in this order (pipeline_setup.cc).
  void check_options();
  void choose_stage_devices();
  void connect_devices();
  void make_device_models();
  void share_cores();
  void account_memory();
  void move_parameters();
  std::vector<std::pair<int64_t, int64_t>> slices(int64_t batch) const;
  // A step, in these steps (pipeline.cc).
  StepStats run(const torch::Tensor& input, const torch::Tensor& target, int64_t samples,
                bool training);
  // `predicting`: a forward for the model's output, which reads no target.
  int64_t check_step(const torch::Tensor& input, const torch::Tensor& target, int64_t samples,
                     bool predicting = false) const;
  StepPlan plan_step(const torch::Tensor& input, const torch::Tensor& target, int64_t batch,
                     bool training);
  void prepare_devices(bool training);
  std::vector<DeviceResult> execute(const StepPlan& plan, bool training);
  StepStats gather_stats(const StepPlan& plan, std::vector<DeviceResult>& results);
  std::vector<torch::Tensor> stage_parameters(int stage) const;
  uint64_t device_bytes(int device) const;
  uint64_t device_peak_bytes(int device) const;
  bool runs_locally(int stage) const { return lead(stage) >= 0; }
  // The first local device of `stage`'s group, or -1 when none is local.
  int lead(int stage) const {
    for (int d : local)
      if (d / slabs == stage_device[stage]) return d;
    return -1;
  }
  // The parameters of `stage` in device d's copy of the model.
  std::vector<torch::Tensor> device_parameters(int d, int stage) const;
  // Spatial split in one process: copies the leads' parameters and buffers into the other
  // local devices of their groups (worker w's job), and sums those devices' weight gradients
  // into the leads' in slab order (after a backward).
  void mirror_from_lead(int w);
  void sum_into_lead(int w);
  bool reads_input() const;
  bool reads_target() const { return runs_locally(flow.loss_stage); }
};

}  // namespace tandem::runtime
