// The planner's step of a schedule on the machine's cores (planner.cc): the schedule's actions
// on shared cores, as in-process CPU devices run them.
#pragma once

#include <vector>

#include "tandem/schedule/schedule.h"
#include "tandem/schedule/simulate.h"
#include "tandem/schedule/stage_graph.h"

namespace tandem::train {

// The step on `cores` cores: each device starts its first action no earlier than `start`
// (per device: its gradients zeroed, which takes no cores). Every device of the schedule is a
// group of `spatial` devices of `threads` threads each, whose compute actions each run
// spatial x threads threads. An action starts as soon as its inputs and its device allow, and
// the running actions share the cores as the system shares them among the devices' threads:
// each action's threads get a core each while there are enough, else an equal share of them,
// and the busy cores run at a speed between 1 (one busy) and `efficiency` (all busy), which
// changes as actions start and end.
// Then every device waits for the sums of its gradients across ranks (`sums`, per device;
// they take no cores) and steps its optimizer (`optimizer`, per device) on its cores.
// `efficiency`: PlanCosts::core_efficiency.
double contended_step(const schedule::Schedule& sched, const schedule::StageGraph& graph,
                      const schedule::Costs& costs, const std::vector<double>& start,
                      const std::vector<double>& sums, const std::vector<double>& optimizer,
                      int spatial, int threads, int cores, double efficiency);

}  // namespace tandem::train
