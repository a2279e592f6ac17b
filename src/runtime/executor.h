// The executor of one device: walks that device's lowered action list for one step.
//
//   Recv  tF m <s   receive stage t's inputs of micro-batch m from stage s (leaves needing grad)
//   F     s m       run stage s's layers; hand outputs to local consumer stages
//   Send  sF m >t   send stage s's outputs of micro-batch m to stage t
//   Recv  sB m <t   receive d(loss)/d(outputs of s) from consumer stage t
//   B     s m       autograd backward from the outputs (and the loss) with those gradients;
//                   weight gradients accumulate in place; d(loss)/d(inputs) kept for sending
//   Send  sB m >p   send d(loss)/d(inputs of s) to producer stage p
//
// Private to the runtime.
#pragma once

#include <map>
#include <vector>

#include "core_share.h"
#include "tandem/common/device.h"
#include "tandem/graph/call_context.h"
#include "tandem/graph/deferred.h"
#include "tandem/graph/partition.h"
#include "tandem/runtime/placement_log.h"
#include "tandem/runtime/timing.h"
#include "tandem/schedule/schedule.h"
#include "tandem/spatial/group.h"
#include "tandem/transport/transport.h"

namespace tandem::runtime {

// Everything an executor needs for one step; shared read-only by all executors.
struct StepPlan {
  // The model each device of the pipeline runs (its own copy on the devices of a spatial
  // group in one process; null for devices of other processes).
  std::vector<const graph::Model*> models;
  // Spatial split: each local device's slab group (null entries without a split).
  std::vector<spatial::Group*> groups;
  int slabs = 1;
  const spatial::SlabLayout* layout = nullptr;  // set when slabs > 1
  const graph::Flow* flow = nullptr;
  const graph::Partition* partition = nullptr;
  const schedule::Schedule* lowered = nullptr;
  const std::vector<int>* stage_device = nullptr;  // stage -> device (group) of the schedule
  transport::Transport* transport = nullptr;
  int replica = 0;
  // Devices per replica (groups x slabs); global device = replica * size + device, and the
  // device of slab j of group g is g * slabs + j.
  int pipeline_size = 1;
  int64_t step = 0;
  int64_t run = 0;  // the pipeline's run counter (transport::MessageKey::run)
  uint64_t seed = 0;
  bool training = true;
  // Forward only, for the model's output: the loss stage keeps each micro-batch's output
  // (DeviceResult::outputs) and computes no loss; there is no target.
  bool predicting = false;
  bool recompute = false;
  int64_t workspace_bound = 0;              // PipelineOptions'
  c10::ScalarType precision = c10::kFloat;  // PipelineOptions'
  bool split_backward = false;              // the schedule has I and W actions
  double loss_scale = 1.0;                  // the loss's backward starts from this
  // [offset, size) of each micro-batch within `input`/`target` (this replica's batch, CPU).
  std::vector<std::pair<int64_t, int64_t>> slices;
  torch::Tensor input, target;
  int64_t global_batch = 0;  // samples over all replicas: the loss weight's denominator
  // Global index of this replica's first sample in the step's batch over all replicas (replica
  // r of batch B starts at r * B): micro-batch m starts at first_sample + slices[m].first.
  int64_t first_sample = 0;
  TimePoint origin;                       // timings are measured from here
  PlacementLog* placement_log = nullptr;  // set: record where each layer ran
  CoreShare* cores = nullptr;             // set: CPU devices lend their cores while they wait
  const std::vector<std::pair<int, int>>* skip_backward = nullptr;  // PipelineOptions'
};

struct DeviceResult {
  torch::Tensor loss;  // weighted loss summed over micro-batches (loss stage only)
  std::vector<std::pair<int, torch::Tensor>> microbatch_losses;  // unweighted, for finiteness
  double metric_sum = 0;
  int64_t samples = 0;
  std::map<int, int> peak_inflight;  // by stage
  std::vector<ActionTiming> timings;
  std::vector<spatial::Exchange> exchanges;  // spatial split: this device's slab exchanges
  // StepPlan::predicting, loss stage: the model's output of each micro-batch (this device's
  // slab of it), on the CPU.
  std::map<int, torch::Tensor> outputs;
};

class Executor {
 public:
  // `device` of the pipeline: slab `device % slabs` of schedule device `device / slabs`.
  Executor(int device, int slabs, const DeviceContext& context)
      : device_(device), group_(device / slabs), slab_(device % slabs), context_(context) {}

  // Runs this device's action list. Throws StepError for a failure here, transport::Aborted
  // when another device failed first.
  DeviceResult run(const StepPlan& plan);

 private:
  struct MicrobatchState {
    std::map<std::string, torch::Tensor> inputs;   // leaves and graph inputs, by tensor name
    std::map<std::string, torch::Tensor> outputs;  // tensors sent to other stages
    torch::Tensor loss;                            // weighted loss, loss stage only
    torch::Tensor target;
    std::shared_ptr<c10::Event> ready;  // recorded after the forward
    int pending_sends = 0;              // forward only, or recomputing: output sends still to make
    // d(loss)/d(output) by tensor name, then by consumer stage (summed in stage order).
    std::map<std::string, std::map<int, torch::Tensor>> output_grads;
    // d(loss)/d(input) by producer stage, then by tensor name; waiting to be sent.
    std::map<int, std::map<std::string, torch::Tensor>> input_grads;
  };

  void execute(const schedule::Action& a);
  void forward(int stage, int mb);
  // Runs the stage's layers on st.inputs, filling st.outputs (and st.loss). `first_pass`:
  // the forward proper, whose loss counts in the result; false for a recomputation.
  void run_layers(int stage, int mb, MicrobatchState& st, bool first_pass);
  // B, or I when `input_only` (weight gradients of splitting layers deferred to W).
  void backward(int stage, int mb, bool input_only);
  void weight_gradients(int stage, int mb);
  void send_forward(int stage, int mb, int to);
  void recv_forward(int stage, int mb, int from);
  void send_backward(int stage, int mb, int to);
  void recv_backward(int stage, int mb, int from);
  int global_device(int stage) const;
  // `t` [B,...] cut to this device's slab (t itself without a spatial split).
  torch::Tensor slab_of(const torch::Tensor& t) const;
  bool is_local(int stage) const;
  transport::MessageKey key(const std::string& tensor, int mb, bool grad, int from, int to) const;

  const graph::Model& model() const { return *plan_->models[device_]; }
  // What layer `layer` (model.layers.size(): the loss) of micro-batch `mb` sees while it runs.
  graph::CallContext call_context(int stage, int mb, int layer, bool first_pass) const;
  spatial::Group* group() const { return plan_->groups.empty() ? nullptr : plan_->groups[device_]; }

  int device_;  // of the pipeline
  int group_;   // the schedule's device: this device's row of the lowered schedule
  int slab_;    // index in the group (0 without a spatial split)
  const DeviceContext& context_;
  const StepPlan* plan_ = nullptr;
  std::map<std::pair<int, int>, MicrobatchState> state_;  // (stage, micro-batch)
  // Deferred weight-gradient work of each (stage, micro-batch), from its forward to its W.
  std::map<std::pair<int, int>, std::unique_ptr<graph::DeferredWeightGrads>> deferred_;
  std::map<int, int> inflight_;  // by stage: forwards done whose backward is not
  DeviceResult result_;
};

}  // namespace tandem::runtime
