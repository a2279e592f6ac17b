#include "tandem/schedule/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "schedule/index.h"
#include "tandem/common/check.h"
#include "tandem/schedule/validate.h"

namespace tandem::schedule {

Costs Costs::uniform(int stages, double f, double b) {
  Costs costs;
  costs.forward.assign(stages, f);
  costs.backward.assign(stages, b);
  return costs;
}

double cost_of(const Costs& c, const Action& a) {
  if (a.kind != Kind::kCompute) return 0;
  const int s = a.stage;
  switch (a.op) {
    case Op::kForward:
      return c.forward[s];
    case Op::kBackward:
      return c.backward.empty() ? c.input[s] + c.weight[s] : c.backward[s];
    case Op::kInput:
      return c.input.empty() ? c.backward[s] / 2 : c.input[s];
    case Op::kWeight:
      return c.weight.empty() ? c.backward[s] / 2 : c.weight[s];
  }
  return 0;
}

namespace {

void check_costs(const Costs& c, int stages) {
  auto check = [stages](const std::vector<double>& v, const char* name, bool required) {
    TANDEM_CHECK(v.empty() ? !required : static_cast<int>(v.size()) == stages,
                 "costs.{} has {} entries but the schedule has {} stages.", name, v.size(), stages);
    for (double x : v) {
      TANDEM_CHECK(std::isfinite(x) && x >= 0, "costs.{} holds {}; costs are finite and >= 0.",
                   name, x);
    }
  };
  check(c.forward, "forward", true);
  check(c.backward, "backward", c.input.empty() || c.weight.empty());
  check(c.input, "input", false);
  check(c.weight, "weight", false);
  TANDEM_CHECK(std::isfinite(c.comm) && c.comm >= 0,
               "costs.comm is {}; it must be finite and >= 0.", c.comm);
}

}  // namespace

Timeline simulate(const Schedule& schedule, const StageGraph& graph, const Costs& costs) {
  validate(schedule, graph);
  check_costs(costs, schedule.num_stages);
  const ScheduleIndex index(schedule, graph);
  const int devices = schedule.num_devices;
  std::vector<int> pos(devices, 0);
  std::vector<double> free(devices, 0);
  std::unordered_map<Action, double, ActionHash> end;  // of every action that has run
  Timeline timeline;
  timeline.busy.assign(devices, 0);

  // When `a` can start on device d, or a negative number if something it needs has not run.
  auto ready_at = [&](const Action& a, int d) {
    double t = free[d];
    if (a.kind == Kind::kSend) return t;
    if (a.kind == Kind::kRecv) {
      return end.count(index.partner(a)) ? t : -1.0;
    }
    for (const Action& need : index.inputs(a)) {
      auto it = end.find(need);
      if (it == end.end()) return -1.0;
      const bool remote = index.device_of(need.stage) != d;
      t = std::max(t, it->second + (remote ? costs.comm : 0));
    }
    return t;
  };

  std::vector<std::vector<TimedAction>> rows(devices);
  for (bool progress = true; progress;) {
    progress = false;
    for (int d = 0; d < devices; ++d) {
      const auto& row = schedule.device_actions[d];
      while (pos[d] < static_cast<int>(row.size())) {
        const Action& a = row[pos[d]];
        const double start = ready_at(a, d);
        if (start < 0) break;
        double finish = start + cost_of(costs, a);
        if (a.kind == Kind::kRecv) finish = std::max(start, end[index.partner(a)] + costs.comm);
        end[a] = finish;
        free[d] = finish;
        if (a.kind == Kind::kCompute) timeline.busy[d] += finish - start;
        rows[d].push_back(TimedAction{d, a, start, finish});
        ++pos[d];
        progress = true;
      }
    }
  }
  for (int d = 0; d < devices; ++d) {
    TANDEM_ASSERT(pos[d] == static_cast<int>(schedule.device_actions[d].size()),
                  "a validated schedule stalled in simulation on d{} at position {}", d, pos[d]);
    timeline.makespan = std::max(timeline.makespan, free[d]);
    timeline.actions.insert(timeline.actions.end(), rows[d].begin(), rows[d].end());
  }
  std::stable_sort(timeline.actions.begin(), timeline.actions.end(),
                   [](const TimedAction& a, const TimedAction& b) { return a.start < b.start; });
  double busy = 0;
  for (double b : timeline.busy) busy += b;
  if (timeline.makespan > 0) timeline.bubble = 1 - busy / (devices * timeline.makespan);
  return timeline;
}

std::string format_timeline(const Timeline& timeline, int devices, double unit) {
  TANDEM_CHECK(unit > 0, "format_timeline needs a positive unit; got {}.", unit);
  const int columns = static_cast<int>(std::ceil(timeline.makespan / unit - 1e-9));
  std::vector<std::string> rows(devices, std::string(std::max(columns, 0), '.'));
  for (const TimedAction& t : timeline.actions) {
    if (t.action.kind != Kind::kCompute || t.device < 0 || t.device >= devices) continue;
    const int first = static_cast<int>(std::floor(t.start / unit + 1e-9));
    const int last = static_cast<int>(std::ceil(t.end / unit - 1e-9));
    for (int c = first; c < last && c < columns; ++c)
      rows[t.device][c] = static_cast<char>(t.action.op);
  }
  std::string out;
  for (int d = 0; d < devices; ++d) out += fmt::format("d{} | {}\n", d, rows[d]);
  return out;
}

}  // namespace tandem::schedule
