// The pieces a stage's predicted memory is built of, shared by the planning (memory_plan.cc)
// and the plan's table (memory_plan_table.cc): who makes and reads every tensor, what a stage
// keeps per micro-batch and holds at its worst layer, and the messages it holds.
#pragma once

#include <algorithm>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/graph/partition.h"
#include "tandem/runtime/memory_plan.h"
#include "tandem/schedule/schedule.h"

namespace tandem::runtime {

// The forward FLOPs per sample of layers [begin, end), of those that know theirs.
double forward_flops(const graph::Model& model, int begin, int end);

// The parts of a stage's predicted peak.
struct StageParts {
  double per_microbatch = 0;     // kept per micro-batch in flight
  double workspace = 0;          // held above the activations at the worst layer, and returned
                                 // gradients of what the stage sent
  double forward_workspace = 0;  // the same at the worst layer's forward (<= workspace)
  double state = 0;              // parameters, gradients, optimizer slots
  double step = 0;               // the optimizer's step above the state (LayerBytes::step)
  double recomputed = 0;         // with recomputation: one micro-batch's activations
  double received = 0;           // the inputs of one micro-batch from earlier stages
  double sent_on = 0;            // the activations of one micro-batch it sends to later stages
  // With recomputation and several micro-batches in flight: what the stage sent of one
  // micro-batch, still on its way while the next micro-batch's forward runs (a later stage
  // takes it when its own work allows). Without recomputation the stage keeps what it sent
  // until the backward anyway.
  double in_transit = 0;
  // Under a split backward: what a micro-batch's deferred W work keeps (0 without one), and
  // what a micro-batch keeps without it (per_microbatch is the larger of the two).
  double deferred = 0;
  double kept = 0;
  // Under a split backward: the most a W action holds above `deferred` (LayerBytes::
  // weight_workspace at each layer's work, less what the work done before it has freed).
  double weight_workspace = 0;
  // The running micro-batch at its worst in an F, B or I action: its kept tensors, its
  // recomputed activations and the workspace.
  double computing() const { return kept + recomputed + workspace; }
  // In a W action: its deferred work and what that work holds as it runs.
  double weighing() const { return deferred > 0 ? deferred + weight_workspace : 0.0; }
  double running() const { return std::max(computing(), weighing()); }
  // In an F action (its forward alone).
  double forwarding() const { return kept + recomputed + forward_workspace; }
  // `messages`: bytes of messages held in a backward besides the above (held_messages.h).
  // The larger of the step's moments (a layer's forward or backward, with the other
  // micro-batches in flight) and the optimizer's step, which runs once every micro-batch's
  // backward is done. `at_most`: with what a receiver that runs late leaves in transit (a
  // receiver that keeps up takes it before the next forward: the planned peak leaves it out).
  double peak(int in_flight, double messages, bool at_most = true) const {
    const double moments =
        in_flight >= 1 ? (in_flight - 1) * per_microbatch + running() : recomputed + workspace;
    const double transit = at_most && in_flight > 1 ? in_transit : 0.0;
    return state + std::max(moments + transit + messages, step);
  }
};

// Whether `schedule` (may be null) splits backwards into I and W actions.
bool splits_backward(const schedule::Schedule* schedule);

// Who makes and who reads every named tensor, by index: what a stage's prediction needs,
// built once per model so that a partition search costs O(layers) per candidate stage.
struct TensorUses {
  std::vector<int> producer;              // per tensor: the layer that makes it; -1: graph input
  std::vector<std::vector<int>> readers;  // per tensor: the layers that read it, ascending
  std::vector<double> bytes;              // per tensor: bytes for one micro-batch
  std::vector<char> unkept;               // per tensor: no autograd graph keeps it
  std::vector<std::vector<int>> touched;  // per layer: the tensors it reads or makes
  int output = -1;                        // the model's output
};

TensorUses index_tensors(const graph::Model& model, const LayerBytes& bytes);

// The stage that computes the loss holds, until the step ends, three fp32 scalars per
// micro-batch of the step (Executor: the micro-batch's loss, its share of the step's, their
// running sum), when every other tensor of the step may be gone: bytes the layers' measurement
// does not see. Of `lowered`'s micro-batches, or `in_flight` without a schedule.
double loss_scalars(const schedule::Schedule* lowered, int in_flight);
// The stage of `partition` that computes the loss: the one that makes the model's output.
int loss_stage(const TensorUses& u, const graph::Partition& partition);

// The parts of the peak of layers [begin, end) as one stage; `partition` (null while partitions
// are searched) says which stages read what it sends.
// `split_backward`: the schedule splits backwards into I and W (splits_backward), so each
// micro-batch between the two holds what its layers' deferred W work keeps.
StageParts stage_parts(const TensorUses& u, const LayerBytes& bytes, int begin, int end,
                       bool recompute, const graph::Partition* partition,
                       bool split_backward = false);

// Per stage: bytes of messages it holds in a backward besides its activations, under `lowered`
// on `partition` (null: none).
struct Messages {
  std::vector<double> ahead;  // received and not used yet: as the schedule orders its recvs
  // Sent, and not yet taken by a receiver that runs late; on a slab also the halo planes of one
  // convolution that a neighbour running ahead has sent (it waits for this slab's halos at its
  // next exchange, so it is never more than one ahead).
  std::vector<double> late;
};
Messages message_bytes(const graph::Model& model, const LayerBytes& bytes,
                       const graph::Partition& partition, bool recompute,
                       const schedule::Schedule* lowered);

}  // namespace tandem::runtime
