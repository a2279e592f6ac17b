// Measuring how long each layer's forward and backward take, for the planner (train/planner.h):
// one micro-batch run layer by layer on the calling thread, as a device's worker would run it.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/spatial/group.h"

namespace tandem::runtime {

// Seconds per layer for one micro-batch: the expected time (expected_time) of the timed
// repetitions after one untimed warm-up, delays included as a step meets them.
struct LayerTimes {
  std::vector<double> forward;   // F: the forward with gradients recorded
  std::vector<double> backward;  // B: the gradients of the inputs and parameters in one call
  // The backward split as a pipeline runs it (zb-h1, zb-v): I, the backward with the layer's
  // weight-gradient work deferred (graph/deferred.h), and W, that work; a layer that defers
  // none runs its whole backward in I. Empty when not measured.
  std::vector<double> input;
  std::vector<double> weight;
  // The optimizer's step over the layer's parameters, once per training step (filled by the
  // caller, which knows the optimizer; empty: not measured).
  std::vector<double> step;
  // Zeroing the layer's weight gradients, once per training step before its first action
  // (filled with `step`; empty: not measured).
  std::vector<double> zero;
  // On a slab of a spatial split, per layer: the exchanges with the other slabs (halos and
  // sums, spatial/group.h) its forward makes and the bytes it sends in them, and the same for
  // its backward (all in the input half of a split one). A dry group times none of them: the
  // planner adds their transfer (planner.h: TransportCosts). Empty on whole samples.
  std::vector<int> forward_exchanges, backward_exchanges;
  std::vector<double> forward_exchange_bytes, backward_exchange_bytes;
};

// How finely splits are told apart by measured times: stages whose costliest is within this
// fraction of the least are taken as equally fast (timings of one layer repeated on a quiet
// machine differ by a few percent), and the most even of them is chosen
// (graph::partition_by_cost_evenly).
constexpr double kTimeSlack = 0.05;

// A quantity's expected time from its repetitions: their mean, each counted at most as twice
// their median (0 without repetitions).
double expected_time(const std::vector<double>& samples);

// Runs `micro_input` (one micro-batch, on the CPU) through `model` layer by layer and times each
// layer's forward, its whole backward (B) and its backward split in two (I, then W), in
// `repeats` rounds through the whole model after a warm-up round, each time the expected time
// over the rounds (expected_time), with `threads` intra-op threads (a CPU device's). `group`
// (null: whole samples): a dry slab group when `micro_input` is one slab of a spatial split, as
// for measure_layer_bytes (its halos are zeros from no neighbour: the exchanges' transfers are
// not timed but counted, LayerTimes::forward_exchanges). `workspace_bound`: the layers'
// (graph::CallContext::workspace_bound); `precision`: the forwards' type (CallContext::precision);
// `split`: false leaves the split backward (input, weight) unmeasured, at half the time.
// Each backward adds into its parameters' gradients, as a pipeline's does into the zeros its
// step starts from; the gradients are put back as they were afterwards. `warm_up`: false
// leaves out the untimed first round, for a measurement of the same layers and shapes again.
LayerTimes measure_layer_times(const graph::Model& model, const torch::Tensor& micro_input,
                               spatial::Group* group = nullptr, int64_t workspace_bound = 0,
                               int repeats = 3, int threads = 1,
                               c10::ScalarType precision = c10::kFloat, bool split = true,
                               bool warm_up = true);

// Measurements of the same layers taken at different moments (each of one repetition) as one:
// each layer's expected_time over them, the optimizer's step and the zeroing their mean, the
// exchanges the first's. Throws tandem::Error for measurements of different layers.
LayerTimes combined(const std::vector<LayerTimes>& passes);

// A measurement as JSON text and back (one process measures for an MPI job).
std::string to_json(const LayerTimes& times);
LayerTimes layer_times_from_json(const std::string& text);

}  // namespace tandem::runtime
