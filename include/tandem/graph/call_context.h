// What a layer may ask about the call it is part of: which step, micro-batch and layer, and
// whether it is training. Set by the runtime around every layer call on the calling thread.
// Layers that draw random numbers (dropout) key their stream on it, so a run draws the same
// masks under any schedule, partition, device count and with recomputation.
#pragma once

#include <cstdint>

#include "tandem/graph/deferred.h"

namespace tandem::spatial {
class Group;
}

namespace tandem::graph {

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

  // A seed for a random stream that depends on every field above but `training`.
  uint64_t stream_seed() const;
};

const CallContext& current_call();

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
