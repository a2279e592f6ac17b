// What a layer may ask about the call it is part of: which step, micro-batch, samples and
// layer, and whether it is training. Set by the runtime around every layer call on the calling
// thread. Layers that draw random numbers (dropout) key them on the step and layer and index
// them by sample (models/keyed_dropout.h), so a run draws the same masks under any schedule,
// partition, device count, micro-batch count and replica count, and with recomputation.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/graph/deferred.h"

namespace tandem::spatial {
class Group;
}

namespace tandem::graph {

// Which part of each whole sample a tensor holds. Empty: whole samples. Otherwise, for a
// tensor [B, d1, ..., dn] that a layer sees, `full_sizes` are the whole sample's sizes
// [d1', ..., dn'] and `offsets` where this tensor's window starts in each of those n
// dimensions (offsets[k] + d(k+1) <= full_sizes[k]). A runtime that splits samples across
// devices (a depth slab of a volume on each) sets it, so per-element random numbers are drawn
// in the whole sample's coordinates.
struct SampleWindow {
  std::vector<int64_t> offsets;
  std::vector<int64_t> full_sizes;

  bool whole() const { return full_sizes.empty(); }
};

struct CallContext {
  uint64_t seed = 0;
  int64_t step = 0;
  int microbatch = 0;
  int layer = 0;  // index of the layer in the model
  bool training = true;
  // The micro-batch's deferred weight-gradient queue (see deferred.h); null when the schedule
  // does not split backward. Owned by the runtime, alive until the micro-batch's W action.
  DeferredWeightGrads* deferred = nullptr;
  int stage = 0;             // the stage the layer belongs to
  bool recomputing = false;  // a forward run again in the backward (--recompute)
  // The slab group of a spatial split (the other slabs of these samples, and how to reach
  // them); null when samples are whole.
  spatial::Group* group = nullptr;
  // Global index of the micro-batch's first sample in the step's batch over all replicas
  // (replica r of batch B holds samples r*B .. r*B+B-1). The runtime's executor sets it.
  int64_t sample_offset = 0;
  // The part of each sample the layer's tensors hold; empty: whole samples.
  SampleWindow window;
  // Micro-batches of the step; 0 outside a pipeline step (a memory measurement), where layers
  // must leave their state alone. Layers that gather statistics over the whole batch (batch
  // normalization's running statistics) know from it when they have seen every micro-batch.
  int microbatches = 0;
  // Bytes a layer's pass may hold for a moment beyond its inputs and result (workspace_bound
  // below); 0: no bound. A convolution runs its passes whole and concatenates its parts for a
  // moment where it is 0 (faster), in chunks of planes and part by part under a bound
  // (models/split_conv.h, spatial/halo_conv.h).
  int64_t workspace_bound = 0;
  // The type the layer's forward computes in (graph/precision.h: forward_in_precision); kFloat:
  // fp32, no autocast.
  c10::ScalarType precision = c10::kFloat;

  // A key for random numbers that depends on `seed`, `step` and `layer` only: never on the
  // micro-batch, so that per-sample streams (indexed by sample_offset) agree however the batch
  // is split.
  uint64_t random_key() const;
};

const CallContext& current_call();

// The workspace bound on devices that may each hold `device_memory` bytes (0: no budget, no
// bound): a 64th of it, so that no single request of a layer is a large part of the budget.
int64_t workspace_bound(uint64_t device_memory);

// 0, 1, 2, ... for the calls of the current ScopedCall: layers that exchange messages with
// other devices within one call number them with it (a message name must be unique).
int next_collective_index();

// Sets the calling thread's CallContext for its lifetime; restores the previous one after.
class ScopedCall {
 public:
  explicit ScopedCall(const CallContext& ctx);
  ~ScopedCall();
  ScopedCall(const ScopedCall&) = delete;
  ScopedCall& operator=(const ScopedCall&) = delete;

 private:
  CallContext previous_;
  int previous_collectives_;
};

}  // namespace tandem::graph
