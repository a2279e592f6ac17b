// The planner's step on shared cores (contended_step.h).
#include "contended_step.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "schedule/index.h"
#include "tandem/common/check.h"

namespace tandem::train {

double contended_step(const schedule::Schedule& sched, const schedule::StageGraph& graph,
                      const schedule::Costs& costs, const std::vector<double>& start,
                      const std::vector<double>& sums, const std::vector<double>& optimizer,
                      int spatial, int threads, int cores, double efficiency) {
  const schedule::ScheduleIndex index(sched, graph);
  const size_t devices = static_cast<size_t>(sched.num_devices);
  const double want = static_cast<double>(spatial) * threads;  // threads per running action
  TANDEM_CHECK(efficiency > 0 && cores > 0,
               "the planner's step needs cores ({}) and their efficiency ({}) above 0", cores,
               efficiency);
  auto of = [](const std::vector<double>& v, size_t d) { return d < v.size() ? v[d] : 0.0; };
  // The busy cores' speed against one's alone; the layers' times were measured at the speed of
  // one device's threads alone.
  auto speed = [&](double busy) {
    return cores > 1 ? 1 - (1 - efficiency) * (busy - 1) / (cores - 1) : 1.0;
  };
  const double measured_at = speed(std::min(threads, cores));
  // Per device: the next action, whether one runs and the work it has left (seconds alone),
  // whether its optimizer ran, and when it may start (its last action's end and its sums).
  std::vector<size_t> pos(devices, 0);
  std::vector<bool> running(devices, false), stepped(devices, false);
  std::vector<double> left(devices, 0.0);
  std::vector<double> release(devices, std::numeric_limits<double>::infinity());
  for (size_t d = 0; d < devices; ++d)
    if (sched.device_actions[d].empty()) release[d] = of(sums, d);
  std::unordered_map<schedule::Action, double, schedule::ActionHash> end;
  double now = 0;
  for (;;) {
    // Start what is ready now: a device's next action once its inputs ended, its optimizer once
    // its actions ended and its sums arrived.
    for (size_t d = 0; d < devices; ++d) {
      if (running[d] || stepped[d]) continue;
      const auto& row = sched.device_actions[d];
      if (pos[d] < row.size()) {
        if (pos[d] == 0 && now < of(start, d)) continue;
        bool ready = true;
        for (const schedule::Action& need : index.inputs(row[pos[d]])) ready &= end.count(need) > 0;
        if (!ready) continue;
        left[d] = schedule::cost_of(costs, row[pos[d]]);
      } else {
        if (now < release[d]) continue;
        left[d] = of(optimizer, d);
      }
      running[d] = true;
    }
    // The running actions share the cores: each gets its threads' cores while they suffice,
    // else its share of them, at the speed the busy cores have.
    int actions = 0;
    for (size_t d = 0; d < devices; ++d) actions += running[d];
    double next_release = std::numeric_limits<double>::infinity();
    for (size_t d = 0; d < devices; ++d) {
      if (stepped[d] || running[d]) continue;
      const bool first = pos[d] == 0 && !sched.device_actions[d].empty();
      const double at = first ? of(start, d) : release[d];
      if (at > now) next_release = std::min(next_release, at);
    }
    if (actions == 0) {
      if (next_release == std::numeric_limits<double>::infinity()) break;
      now = next_release;
      continue;
    }
    const double demand = actions * want;
    const double busy = std::min(demand, static_cast<double>(cores));
    const double rate = std::min(1.0, cores / demand) * speed(busy) / measured_at;
    // Until the first running action ends, or a device may start or step its optimizer.
    double dt = next_release - now;
    for (size_t d = 0; d < devices; ++d)
      if (running[d]) dt = std::min(dt, left[d] / rate);
    now += dt;
    for (size_t d = 0; d < devices; ++d) {
      if (!running[d]) continue;
      left[d] -= rate * dt;
      if (left[d] > 1e-12 * std::max(1.0, now)) continue;
      running[d] = false;
      const auto& row = sched.device_actions[d];
      if (pos[d] < row.size()) {
        end[row[pos[d]++]] = now;
        if (pos[d] == row.size()) release[d] = now + of(sums, d);
      } else {
        stepped[d] = true;
      }
    }
  }
  for (size_t d = 0; d < devices; ++d)
    TANDEM_CHECK(stepped[d],
                 "the planner's step of {} stalls on device {}: its next action waits for one "
                 "that never runs",
                 sched.name, d);
  return now;
}

}  // namespace tandem::train
