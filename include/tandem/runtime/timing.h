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

}  // namespace tandem::runtime
