// The planner's step of a schedule on the machine's cores (planner.cc): the schedule's actions
// on shared cores, as in-process CPU devices run them.
#pragma once

#include <vector>

#include "tandem/schedule/schedule.h"
#include "tandem/schedule/simulate.h"
#include "tandem/schedule/stage_graph.h"

namespace tandem::train {

// The step on `cores` cores: every device of the schedule is a group of `spatial` devices of
// `threads` threads each, whose compute actions take spatial x threads cores at once (all of
// them, and proportionally longer, where there are fewer). Actions run in the order of the
// earliest start their inputs and their device allow, each on the cores free soonest, as the
// pipeline's core share hands out cores to the devices that wait (runtime/core_share.h); then
// every device waits for the sums of its gradients across ranks (`sums`, per device; they take
// no cores) and steps its optimizer (`optimizer`, per device) on its cores.
// `efficiency`: PlanCosts::core_efficiency.
double contended_step(const schedule::Schedule& sched, const schedule::StageGraph& graph,
                      const schedule::Costs& costs, const std::vector<double>& sums,
                      const std::vector<double>& optimizer, int spatial, int threads, int cores,
                      double efficiency);

}  // namespace tandem::train
