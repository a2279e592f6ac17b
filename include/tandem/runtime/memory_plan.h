// Partitions that balance memory instead of parameters.
//
// A stage's memory is its parameter state (parameters, gradients, optimizer slots) plus the
// activations of every micro-batch it holds at once, which the schedule decides: GPipe holds
// all m, 1F1B holds p - s on stage s. With recomputation a stage keeps only its inputs per
// micro-batch in flight and the activations of the one micro-batch it recomputes. The bytes per
// layer are measured, not guessed: one micro-batch runs forward through the model on the
// calling thread while the CPU allocator hook counts what each layer leaves alive, and each
// layer's forward and backward run once more on their own to count their passing workspace.
// A stage's peak adds to what it stores the most the running micro-batch holds above its
// activations at any one layer: going back through the layers, the later layers' tensors are
// freed, the tensors the stage sent stay until its backward ends, skip gradients wait for
// their producer, and the gradient messages for what it sent (one per reading stage, and
// their sum) are held throughout. Besides, a stage holds messages in a backward
// (schedule/held_messages.h): what it received ahead (inputs of later micro-batches, gradients
// for other backwards, as the lowered schedule orders its recvs), and what it sent that a
// receiver running late has not taken yet (gradients; with recomputation, activations too).
// The planned peak counts the first, "at most" both: the most any timing of the schedule
// allows. Partitions are searched by the planned peak, with the schedule lowered on a chain of
// stages; for a chosen partition both come from the schedule lowered on its stage graph.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/graph/partition.h"
#include "tandem/schedule/schedule.h"
#include "tandem/spatial/group.h"

namespace tandem::runtime {

struct LayerBytes {
  // Per layer: bytes its forward leaves alive for one micro-batch (outputs and tensors saved
  // for the backward), measured as the growth of the allocator's count over the call.
  std::vector<uint64_t> activations;
  // Per layer: the most bytes its forward or its backward holds for a moment above what it
  // leaves alive (the larger of the two below).
  std::vector<uint64_t> transient;
  // Per layer: the most its forward holds above what it leaves alive: workspaces such as a
  // convolution's copies in a blocked layout, and outputs no autograd graph keeps.
  std::vector<uint64_t> forward;
  // Per layer: the most its backward holds above what is in use when it starts, as it runs
  // inside a stage: the gradients that reach its outputs (made as it starts, freed once used),
  // the ones it makes, workspaces; its outputs go once its graph no longer needs them.
  // Measured by running the layer once more on its own.
  std::vector<uint64_t> backward;
  // The same where the stage keeps the layer's outputs through its backward and the gradients
  // that reach them are counted apart (a stage that sends its outputs holds them, and the
  // gradient messages for them, until its backward ends).
  std::vector<uint64_t> backward_held;
  // Per layer: what it holds for its weight gradient between the two halves of a split backward
  // (schedules with I and W actions): the tensors its deferred W work keeps (its input, the
  // gradient of its output), with everything else of the micro-batch's graph freed. 0 for a
  // layer that does not split.
  std::vector<uint64_t> deferred;
  // Per layer: the most its deferred W work holds above `deferred` while a W action runs it
  // (each piece of work freed once done): the weight gradient it makes and its workspace. Empty
  // where not measured; 0 for a layer that does not split.
  std::vector<uint64_t> weight_workspace;
  // Per layer: `backward` and `backward_held` for the input half of a split backward (its
  // weight work deferred; its whole backward where it defers none). There its outputs stay alive
  // where a later layer's deferred work keeps them: `input_backward` counts them so throughout
  // (a bound from above where none does). Empty where not measured.
  std::vector<uint64_t> input_backward;
  std::vector<uint64_t> input_backward_held;
  // Per layer: bytes of the halo planes its forward receives on a slab of a spatial split (0 on
  // whole samples); the layer holds them while it runs, and keeps none of them.
  std::vector<uint64_t> halo;
  // Per layer: parameters, their gradients and `optimizer_slots` tensors of their size.
  std::vector<uint64_t> state;
  // Per layer: what the optimizer's step holds for a moment above the state while it updates
  // the layer's parameters: `step_temporaries` tensors the size of its largest one. Empty: none.
  std::vector<uint64_t> step;
  // Per named tensor, the graph input included: its bytes for one micro-batch.
  std::map<std::string, uint64_t> tensors;
  // The model's output as the loss reads it, in fp32 (a copy of its own under a reduced
  // --precision, which replaces the output), for one micro-batch; and the micro-batch's target
  // (a slab's share on slabs; set by the caller, which has the data). The stage with the loss
  // holds the target from the micro-batch's forward to its backward, and the copy from the loss
  // to the start of the backward.
  uint64_t loss_input = 0;
  uint64_t target = 0;
  // The layers' outputs that no autograd graph keeps (gone after their last reader, so in no
  // layer's activations): a stage that sends one on keeps it until its backward.
  std::vector<std::string> unkept;
};

// Runs `micro_input` (one micro-batch, on the CPU) forward through `model` with gradients
// recorded and counts the bytes. Installs the CPU accounting if needed. `optimizer_slots`:
// tensors the optimizer keeps per parameter (Adam 2, SGD with momentum 1, plain SGD 0).
// `group` (null: whole samples): a dry slab group (spatial/group.h) when `micro_input` is one
// slab of a spatial split; its layers then count the slab's tensors with their halos.
// `step_temporaries`: tensors of a parameter's size that the optimizer's step makes for a moment
// (LibTorch's Adam 2: the square root of the second moment and its quotient; SGD none).
// `workspace_bound`: the layers' (graph::CallContext::workspace_bound), as the run will have it;
// `precision`: the type the forwards compute in (graph::CallContext::precision), as the run's.
LayerBytes measure_layer_bytes(const graph::Model& model, const torch::Tensor& micro_input,
                               int optimizer_slots, spatial::Group* group = nullptr,
                               int step_temporaries = 0, int64_t workspace_bound = 0,
                               c10::ScalarType precision = c10::kFloat);

// A measurement as JSON text and back, for one process to measure and the others of an MPI job
// to read. Throws Error for text that is not such a measurement.
std::string to_json(const LayerBytes& bytes);
LayerBytes layer_bytes_from_json(const std::string& text);

// Predicted peak bytes of layers [begin, end) as one stage holding `in_flight` micro-batches.
// Without the rest of the partition, each later layer that reads one of its outputs counts as
// a stage that sends a gradient back: a bound from above for partition search.
double stage_bytes(const graph::Model& model, const LayerBytes& bytes, int begin, int end,
                   int in_flight, bool recompute);

// The contiguous partition into in_flight.size() stages whose largest predicted peak
// (stage_bytes) is smallest. `in_flight[s]`: micro-batches stage s holds at once
// (schedule::peak_in_flight of the schedule that will run). `chain` (null: no messages
// counted): that schedule lowered on StageGraph::chain, whose messages received ahead count.
graph::Partition partition_by_memory(const graph::Model& model, const LayerBytes& bytes,
                                     const std::vector<int>& in_flight, bool recompute,
                                     const schedule::Schedule* chain = nullptr);

// Among the contiguous partitions whose every stage plans at most `stage_budget` bytes (as
// partition_by_memory counts them), the one whose costliest stage has the least work: the sum
// of `layer_costs` over its layers (one per layer, e.g. measured seconds), or without them its
// forward FLOPs (graph::Layer::forward_flops_per_sample); then, of the splits that fit whose
// costliest stage is within `slack` (a fraction) of that least, the most even
// (graph::partition_by_cost_evenly). The fastest split that fits. When none fits, the one with
// the smallest largest peak, as partition_by_memory.
graph::Partition partition_to_fit(const graph::Model& model, const LayerBytes& bytes,
                                  const std::vector<int>& in_flight, bool recompute,
                                  double stage_budget, const schedule::Schedule* chain = nullptr,
                                  const std::vector<double>* layer_costs = nullptr,
                                  double slack = 0);

// The most bytes every stage of `partition` can hold ("at most"): during its backward a stage
// holds one gradient message per stage that read a tensor it sent, and their sum. `lowered`
// (may be null: no messages counted): the lowered schedule that runs on `partition`, whose
// messages count with their bytes.
std::vector<double> stage_peaks(const graph::Model& model, const LayerBytes& bytes,
                                const graph::Partition& partition,
                                const std::vector<int>& in_flight, bool recompute,
                                const schedule::Schedule* lowered = nullptr);

// The planned peak of every stage of `partition`: "at most" less what late receivers leave
// (the plan's "planned peak" column).
std::vector<double> planned_peaks(const graph::Model& model, const LayerBytes& bytes,
                                  const graph::Partition& partition,
                                  const std::vector<int>& in_flight, bool recompute,
                                  const schedule::Schedule* lowered = nullptr);

// The planned peak of every device of `lowered` (the schedule that runs on `partition`,
// lowered on its stage graph) where a device runs several stages (interleaved, zb-v, more
// stages than devices): its stages' state, plus the most its stages keep at any one compute
// action as the device runs its list in order (the micro-batches each stage holds then, the
// acting stage's workspace and, recomputing, its activations), plus the messages each stage
// receives ahead and those a late receiver may leave with it: "at most", as stage_peaks. Below
// the sum of its stages' peaks, which assumes every stage at its worst at once. `at_most` false:
// without what late receivers and activations in transit may leave, as planned_peaks.
std::vector<double> device_peaks(const graph::Model& model, const LayerBytes& bytes,
                                 const graph::Partition& partition, bool recompute,
                                 const schedule::Schedule& lowered, bool at_most = true);

// How long a step of `schedule` (lowered or not) would take on `partition` if every forward cost
// its stage's FLOPs, a backward twice that and messages nothing, against the same work on all
// devices busy all the time (so at least 1), and the bubble of that timeline. Nothing when no
// layer knows its FLOPs.
struct FlopForecast {
  double slowdown = 1;
  double bubble = 0;
};
std::optional<FlopForecast> flop_forecast(const graph::Model& model,
                                          const graph::Partition& partition,
                                          const schedule::Schedule& schedule);

// A slab's bytes against one device's for the same voxels, layer by layer: `slab` measured on
// one slab of a spatial split (with its halos), `whole` on the same planes as whole samples
// (zero padding where the slab has halos). A table with, per layer, the bytes kept for the
// backward on one device and on the slab, the slab's halo planes, and the passing workspace on
// both; then the totals and the planned peak of one stage holding every layer, each as slab /
// one device.
std::string slab_bytes_table(const graph::Model& model, const LayerBytes& whole,
                             const LayerBytes& slab);

// The ratios the table ends with: kept bytes (all layers) and the planned peak of one stage
// holding every layer, one micro-batch, slab / one device.
struct SlabRatios {
  double kept = 1;
  double peak = 1;
};
SlabRatios slab_ratios(const graph::Model& model, const LayerBytes& whole, const LayerBytes& slab);

// A table of the prediction per stage: layers, their share of the forward FLOPs, micro-batches
// in flight, bytes kept per micro-batch, the largest workspace, messages received ahead, the
// parameter state, the planned peak, messages a late receiver may leave with it, and the peak
// at most; then a line "planned: peak_bytes=B0,B1,... at_most_bytes=A0,A1,..." with the
// planned peak and the peak at most of every stage in bytes.
std::string memory_plan_table(const graph::Model& model, const LayerBytes& bytes,
                              const graph::Partition& partition, const std::vector<int>& in_flight,
                              bool recompute, const schedule::Schedule* lowered = nullptr);

}  // namespace tandem::runtime
