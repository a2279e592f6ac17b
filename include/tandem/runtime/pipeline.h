// Pipeline: one model split into stages on devices, trained with a schedule.
//
// Each local device has one worker thread that interprets its action list of the (lowered)
// schedule: receive inputs, run its stages' layers forward, send outputs; receive output
// gradients, run autograd backward, send input gradients. Weight gradients stay on the stage;
// with replicas they are summed across the data-parallel group before the optimizer step.
//
// Shapes: input [B, ...] and target [B, ...] on the CPU, B this replica's batch.
//
// Thread-safety: one thread drives a Pipeline; its methods are not reentrant.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/common/device.h"
#include "tandem/graph/model.h"
#include "tandem/graph/partition.h"
#include "tandem/runtime/placement_log.h"
#include "tandem/runtime/timing.h"
#include "tandem/schedule/schedule.h"
#include "tandem/spatial/group.h"
#include "tandem/spatial/slabs.h"
#include "tandem/transport/transport.h"

namespace tandem::runtime {

struct PipelineOptions {
  // One entry per device of one replica's pipeline. Without a spatial split stage s runs on
  // devices[stage_device[s]]; with `slabs` > 1 on the group of devices
  // [stage_device[s] * slabs, (stage_device[s] + 1) * slabs), one slab on each.
  std::vector<DeviceSpec> devices;
  // Device (group, with slabs > 1) of each stage; empty means stage s on device s (then
  // stages == devices.size() / slabs), or as the schedule places them (interleaved: stage s on
  // device s % devices).
  std::vector<int> stage_device;
  // Spatial split: every sample cut into `slabs` slabs along the model's slab_dim
  // (graph::Model::slab_dim, spatial/slabs.h), slab j on device j of each stage's group. The
  // group's devices run the same schedule on their slabs, exchange halos and whole-sample sums
  // inside the layers, and sum their weight gradients before the optimizer step, so a step
  // equals one device's. 1: whole samples.
  int slabs = 1;
  // With slabs > 1: the samples' planes along slab_dim (every step's input must have them).
  int64_t slab_extent = 0;
  std::string schedule = "1f1b";
  int microbatches = 1;
  int virtual_stages = 1;
  int replicas = 1;
  uint64_t seed = 0;
  // true: keep only each stage's inputs per micro-batch and recompute its forward in the
  // backward (same dropout masks).
  bool recompute = false;
  // The type each device's forward (and recomputed forward) computes in, under autocast on its
  // device (graph/precision.h); kFloat: none.
  c10::ScalarType precision = c10::kFloat;
  std::chrono::milliseconds comm_timeout{std::chrono::seconds(300)};
  // Bytes each device may hold (0: no limit). On CPU devices every tensor allocation is
  // charged to the device whose worker made it; on CUDA the caching allocator is capped.
  uint64_t device_memory = 0;
  // Bytes a layer's pass may hold for a moment beyond its inputs and result
  // (graph::CallContext::workspace_bound; graph::workspace_bound(device_memory) gives tandem's
  // for a budget); 0: no bound, the faster passes.
  int64_t workspace_bound = 0;
  // false: each device keeps its own threads (DeviceSpec::threads) whatever the others do, and
  // a run gives the same bits every time. true: CPU devices of this process lend their cores
  // while they wait: a device computing alone multiplies with the cores of the devices waiting
  // (CoreShare). Faster when stages often wait, but how many BLAS threads compute a product
  // then depends on timing, and on some BLAS kernels (OpenBLAS's Haswell and Zen ones) so do
  // the last bits of the product: results are no longer bitwise reproducible.
  bool lend_idle_cores = false;
  // Record, from what executes, the device of every layer's forward and backward.
  bool log_placement = false;
  // (stage, micro-batch) pairs whose backward does not run: a fault that tandem verify must
  // catch. The stage's inputs get zero gradients, so its neighbours do not wait.
  std::vector<std::pair<int, int>> skip_backward;
  // Set to run across processes (MPI); null: an in-process transport is built.
  std::shared_ptr<transport::Transport> transport;
  // Set: called once with the transport the pipeline will use (`transport`, or the in-process
  // one it built), and the pipeline uses what it returns instead, which must connect the same
  // devices. How a test puts a transport::FaultyTransport around the in-process transport.
  std::function<std::shared_ptr<transport::Transport>(std::shared_ptr<transport::Transport>)>
      wrap_transport;
};

// Builds a stage's optimizer from its parameters.
using OptimizerFactory =
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor> params)>;

struct StepStats {
  // The loss of this replica's samples as a share of the step's mean over every replica's
  // (each micro-batch weighted by its samples over the samples of all replicas, where the
  // backward starts): the mean over the batch with one replica; with several, their shares add
  // up to the step's mean (Trainer::train_step adds them).
  double loss = 0;
  double metric_sum = 0;  // Model::metric summed over the samples
  int64_t samples = 0;
  // Seconds from the step's start to its last action's end: Pipeline::forward_backward's
  // gradient sums and the optimizer's step come after (train::Trainer::train_step's seconds
  // take them in).
  double seconds = 0;
  // When the step started, in microseconds of the steady clock (the timings of
  // Pipeline::last_timings() and last_phases() count from here).
  double started_us = 0;
  // Largest number of micro-batches whose activations a stage held at once, per stage.
  std::vector<int> peak_inflight;
  // Spatial split: the halo exchanges and whole-sample sums of the local devices, by device of
  // the pipeline (empty without a split).
  std::vector<std::vector<spatial::Exchange>> exchanges;
  // Per device of the pipeline (local devices only; 0 elsewhere): bytes in use at the end of
  // the step and the most in use at once during it.
  std::vector<uint64_t> current_bytes, peak_bytes;
  // Loss scaling (set by train::Trainer): the scale this step's backward started from (0: none),
  // and whether the optimizer skipped the step because a gradient somewhere in the job was
  // infinite or NaN.
  double loss_scale = 0;
  bool skipped = false;
};

// What Pipeline::predict gives: the model's output and the step's stats (its loss and metric
// are 0: a prediction reads no target).
struct Prediction {
  // [B, ...] on the CPU, every micro-batch and slab in place; undefined in a process that does
  // not run the last stage's first slab.
  torch::Tensor output;
  StepStats stats;
};

class Pipeline {
 public:
  // Also sets the calling thread's ATen thread count (and OpenBLAS's) to the devices' count, so
  // that what the caller computes next (the data, the evaluation's bookkeeping) does not depend
  // on the cores or on which thread set a count first.
  Pipeline(graph::Model model, graph::Partition partition, PipelineOptions options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Zeroes the gradients, then runs forward and backward of every micro-batch; afterwards each
  // parameter's grad holds d(mean loss over the whole batch)/d(parameter), summed across
  // replicas. Throws tandem::Error (StepError) naming device, stage, action and micro-batch
  // when any device fails; no device is left waiting.
  // A process whose stages read neither the graph input nor the target (an MPI rank in the
  // middle of the pipeline, see needs_input/needs_target) may pass undefined tensors for what
  // it does not need, and then gives the batch size as `samples`.
  StepStats forward_backward(const torch::Tensor& input, const torch::Tensor& target,
                             int64_t samples = -1);
  // Forward only, no gradients, dropout off.
  StepStats evaluate(const torch::Tensor& input, const torch::Tensor& target, int64_t samples = -1);
  // Forward only, no gradients, dropout off, no target and no loss: the model's output for
  // `input`, assembled from every micro-batch and slab in the process that runs the last
  // stage's first slab (the other slabs send theirs there). Collective across processes.
  Prediction predict(const torch::Tensor& input, int64_t samples = -1);

  // One optimizer per stage, stepped on the stage's own worker.
  void set_optimizer(const OptimizerFactory& factory);
  void optimizer_step();
  // Loss scaling (train/loss_scale.h): the next forward_backward's loss backward starts from
  // `scale` (> 0) instead of 1, so every gradient comes out `scale` times larger.
  void set_loss_scale(double scale);
  // Divides the gradients of the stages this process steps (each stage's lead device, where
  // forward_backward summed them) by the loss scale, and says whether they are all finite. A
  // job must skip the step everywhere when any process's answer is false.
  bool unscale_gradients();
  // The optimizer of a local stage (null before set_optimizer), e.g. to save its state.
  torch::optim::Optimizer* optimizer(int stage) const;
  // Parameters of one local stage, in the order its optimizer holds them.
  std::vector<std::pair<std::string, torch::Tensor>> stage_named_parameters(int stage) const;
  // Continues the step count (dropout streams are keyed by it), e.g. after a resume.
  void set_step(int64_t step);

  // Parameters of the local stages as "<layer>.<name>" (stage order), on their devices.
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;
  const graph::Model& model() const;
  const graph::Partition& partition() const;
  const graph::Flow& flow() const;
  // The lowered schedule every device interprets.
  const schedule::Schedule& schedule() const;
  const std::vector<int>& stage_device() const;
  const std::vector<DeviceSpec>& devices() const;
  int64_t step() const;
  // The data-parallel replica this process runs (0 in process): its first device over the
  // devices of one replica.
  int replica() const;
  // Stages this process owns (all of them in process; one device's stages under MPI).
  std::vector<int> local_stages() const;
  // Whether this process reports the loss and metric: it runs the stage that computes the
  // loss (on the first slab of a spatial split).
  bool owns_loss() const;
  // The spatial split (slabs 1: whole samples).
  int slabs() const;
  // The local device of the pipeline whose copy of `stage` the optimizer steps (the group's
  // first local device; its slab is lead_device % slabs), or -1 when the stage is elsewhere.
  int lead_device(int stage) const;
  // Whether a local stage reads the graph input, or computes the loss (reads the target).
  bool needs_input() const;
  bool needs_target() const;

  // What each device executed in the last step, with times since the step's start.
  const std::vector<ActionTiming>& last_timings() const;
  // The phases of the last training step after its actions, on the local devices that lead a
  // stage's group: the gradients' sums (forward_backward) and the optimizer's step
  // (optimizer_step), with times since the step's start.
  const std::vector<PhaseTiming>& last_phases() const;

  // Bytes in use and peak bytes of each device of the pipeline since the last reset.
  uint64_t device_bytes(int device) const;
  uint64_t device_peak_bytes(int device) const;

  // With log_placement: per layer, the devices its forward and backward ran on, as a table.
  std::string placement_log_table() const;
  const PlacementLog* placement_log() const;

  // A table: stage, device, layers, parameters.
  // `hosts` (under MPI: the host of every rank) adds rank and host columns; a stage's rank is
  // its device (replica 0).
  std::string placement_table(const std::vector<std::string>& hosts = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The error a failed step throws: the first failure on any device.
class StepError : public Error {
 public:
  StepError(const std::string& what, int device, int stage, std::string action, int microbatch,
            bool out_of_memory)
      : Error(what),
        device(device),
        stage(stage),
        action(std::move(action)),
        microbatch(microbatch),
        out_of_memory(out_of_memory) {}
  int device;
  int stage;
  std::string action;
  int microbatch;
  bool out_of_memory;  // a device exceeded its memory budget
};

}  // namespace tandem::runtime
