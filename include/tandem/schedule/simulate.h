// Predicts the timeline of a schedule from per-action costs, to compare schedules and to set
// against what a run measured. Time is in whatever unit the costs are in.
#pragma once

#include <string>
#include <vector>

#include "tandem/schedule/action.h"
#include "tandem/schedule/schedule.h"
#include "tandem/schedule/stage_graph.h"

namespace tandem::schedule {

// Per-stage costs of each compute action, and the time one message takes.
struct Costs {
  std::vector<double> forward;   // F, one entry per stage
  std::vector<double> backward;  // B; if empty, B = I + W
  std::vector<double> input;     // I; if empty, I = B / 2
  std::vector<double> weight;    // W; if empty, W = B / 2
  double comm = 0;               // added between a send and its arrival at another device

  // Every stage F = f, B = b (so I = W = b / 2), comm = 0.
  static Costs uniform(int stages, double f = 1, double b = 1);
};

// The cost of one compute action under `costs` (0 for send/recv).
double cost_of(const Costs& costs, const Action& action);

struct TimedAction {
  int device = 0;
  Action action;
  double start = 0;
  double end = 0;
};

struct Timeline {
  std::vector<TimedAction> actions;  // every action, by start time (ties: device, list order)
  double makespan = 0;               // the last end
  std::vector<double> busy;          // per device: total time computing
  double bubble = 0;                 // 1 - sum(busy) / (devices * makespan); 0 if makespan = 0
};

// Validates, then runs every device's list in order: a compute starts when its device is free
// and its inputs have arrived (an input from another device arrives `comm` after the producer
// ends); sends are buffered and take no time; a recv (lowered schedules) holds its device until
// the data arrives. Throws tandem::Error for an invalid schedule or costs of the wrong size.
Timeline simulate(const Schedule& schedule, const StageGraph& graph, const Costs& costs);

// One row per device, one character column per `unit` of time: the op letter of the compute
// running there ('F', 'B', 'I', 'W') or '.' when idle. For a glance at the bubbles:
//   d0 | FFFF....BBBB
std::string format_timeline(const Timeline& timeline, int devices, double unit = 1);

}  // namespace tandem::schedule
