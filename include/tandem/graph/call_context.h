// What a layer may ask about the call it is part of: which step, micro-batch and layer, and
// whether it is training. Set by the runtime around every layer call on the calling thread.
// Layers that draw random numbers (dropout) key their stream on it, so a run draws the same
// masks under any schedule, partition, device count and with recomputation.
#pragma once

#include <cstdint>

#include "tandem/graph/deferred.h"

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

  // A seed for a random stream that depends on every field above but `training`.
  uint64_t stream_seed() const;
};

const CallContext& current_call();

// Sets the calling thread's CallContext for its lifetime; restores the previous one after.
class ScopedCall {
 public:
  explicit ScopedCall(const CallContext& ctx);
  ~ScopedCall();
  ScopedCall(const ScopedCall&) = delete;
  ScopedCall& operator=(const ScopedCall&) = delete;

 private:
  CallContext previous_;
};

}  // namespace tandem::graph
