// Measured execution of actions, for traces, reports and comparison with the simulator.
#pragma once

#include <chrono>
#include <vector>

#include "tandem/schedule/schedule.h"

namespace tandem::runtime {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

struct ActionTiming {
  int device = 0;  // device of the pipeline
  schedule::Action action;
  double start_us = 0;  // since the start of the step
  double end_us = 0;
};

// A measured phase of a training step after its actions, on one device: the sums of its weight
// gradients (over the slabs of a spatial split and over the replicas) or the optimizer's step.
struct PhaseTiming {
  int device = 0;       // device of the pipeline
  char kind = 'G';      // 'G' the gradients' sums, 'O' the optimizer's step (trace::Span::kind)
  double start_us = 0;  // since the start of the step
  double end_us = 0;
};

}  // namespace tandem::runtime
