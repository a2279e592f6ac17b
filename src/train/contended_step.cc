// The planner's step on shared cores (contended_step.h).
#include "contended_step.h"

#include <algorithm>
#include <unordered_map>

#include "schedule/index.h"

namespace tandem::train {

double contended_step(const schedule::Schedule& sched, const schedule::StageGraph& graph,
                      const schedule::Costs& costs, const std::vector<double>& sums,
                      const std::vector<double>& optimizer, int spatial, int threads, int cores,
                      double efficiency) {
  const schedule::ScheduleIndex index(sched, graph);
  const int devices = sched.num_devices;
  const int want = spatial * threads;
  const int take = std::min(want, cores);
  const double stretch = static_cast<double>(want) / take;
  std::vector<double> core_free(static_cast<size_t>(cores), 0.0);
  std::vector<size_t> pos(static_cast<size_t>(devices), 0);
  std::vector<double> device_free(static_cast<size_t>(devices), 0.0);
  std::unordered_map<schedule::Action, double, schedule::ActionHash> end;
  // Runs `seconds` of work from `earliest` on the cores free soonest; returns its end. Its
  // cores run slower the more of the others are busy when it starts: at `efficiency` of their
  // speed alone when all are.
  auto run = [&](double earliest, double seconds) {
    std::sort(core_free.begin(), core_free.end());
    const double start = std::max(earliest, core_free[static_cast<size_t>(take - 1)]);
    int busy = take;
    for (int k = take; k < cores; ++k) busy += core_free[static_cast<size_t>(k)] > start;
    const double speed =
        cores > 1 ? 1 - (1 - efficiency) * (busy - 1) / static_cast<double>(cores - 1) : 1.0;
    const double finish = start + seconds * stretch / speed;
    for (int k = 0; k < take; ++k) core_free[static_cast<size_t>(k)] = finish;
    return finish;
  };
  for (;;) {
    int best = -1;
    double best_start = 0;
    for (int d = 0; d < devices; ++d) {
      const auto& row = sched.device_actions[static_cast<size_t>(d)];
      if (pos[static_cast<size_t>(d)] == row.size()) continue;
      const schedule::Action& a = row[pos[static_cast<size_t>(d)]];
      double t = device_free[static_cast<size_t>(d)];
      bool ready = true;
      for (const schedule::Action& need : index.inputs(a)) {
        const auto it = end.find(need);
        if (it == end.end()) {
          ready = false;
          break;
        }
        t = std::max(t, it->second);
      }
      if (ready && (best < 0 || t < best_start)) {
        best = d;
        best_start = t;
      }
    }
    if (best < 0) break;
    const schedule::Action& a =
        sched.device_actions[static_cast<size_t>(best)][pos[static_cast<size_t>(best)]++];
    const double finish = run(best_start, schedule::cost_of(costs, a));
    end[a] = finish;
    device_free[static_cast<size_t>(best)] = finish;
  }
  auto of = [](const std::vector<double>& v, int d) {
    return d < static_cast<int>(v.size()) ? v[static_cast<size_t>(d)] : 0.0;
  };
  double last = 0;
  for (int d = 0; d < devices; ++d)
    last = std::max(last, run(device_free[static_cast<size_t>(d)] + of(sums, d), of(optimizer, d)));
  return last;
}

}  // namespace tandem::train
