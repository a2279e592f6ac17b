#include "schedule/replay.h"

namespace tandem::schedule {
std::vector<Stall> replay(const Schedule& schedule, const ScheduleIndex& index, Sends sends) {
  const int devices = static_cast<int>(schedule.device_actions.size());
  std::vector<int> pos(devices, 0);
  auto size = [&](int d) { return static_cast<int>(schedule.device_actions[d].size()); };
  auto done = [&](const Action& a) {
    const Slot* s = index.find(a);
    return s != nullptr && pos[s->device] > s->index;
  };
  // The first input of a compute that has not run yet, or nullptr.
  auto missing_input = [&](const Action& a, Action* out) {
    for (const Action& need : index.inputs(a)) {
      if (!done(need)) {
        *out = need;
        return true;
      }
    }
    return false;
  };
  Action unused;
  // Each pass moves at least one device forward, or ends the loop.
  for (bool progress = true; progress;) {
    progress = false;
    for (int d = 0; d < devices; ++d) {
      while (pos[d] < size(d)) {
        const Action& a = schedule.device_actions[d][pos[d]];
        if (sends == Sends::kBuffered) {
          if (a.kind == Kind::kCompute && missing_input(a, &unused)) break;
          if (a.kind == Kind::kRecv && !done(index.partner(a))) break;
        } else if (a.kind == Kind::kRecv) {
          break;  // completed from the sending side
        } else if (a.kind == Kind::kSend) {
          const Slot* r = index.find(index.partner(a));
          if (r == nullptr || pos[r->device] != r->index) break;
          ++pos[r->device];
        }
        ++pos[d];
        progress = true;
      }
    }
  }
  std::vector<Stall> stalls;
  for (int d = 0; d < devices; ++d) {
    if (pos[d] == size(d)) continue;
    const Action& a = schedule.device_actions[d][pos[d]];
    Stall stall{d, pos[d], a};
    if (a.kind != Kind::kCompute) {
      stall.waits_for = index.partner(a);
    } else {
      missing_input(a, &stall.waits_for);
    }
    stalls.push_back(stall);
  }
  return stalls;
}

}  // namespace tandem::schedule
