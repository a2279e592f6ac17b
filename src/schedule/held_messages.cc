#include "schedule/held_messages.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <tuple>

#include "schedule/index.h"
#include "tandem/common/check.h"

namespace tandem::schedule {

namespace {

// A message a stage received and has not used yet: (micro-batch, sender, op of the message).
struct Held {
  int microbatch, from;
  Op op;
  bool operator<(const Held& o) const {
    return std::tie(microbatch, from, op) < std::tie(o.microbatch, o.from, o.op);
  }
};
using Waiting = std::set<Held>;

// Walks every device's list and calls at(stage, waiting) at each backward (B or I) of a stage
// with what that stage received and has not used: inputs of forwards that have not run, and
// gradients for the backwards of other micro-batches. A forward uses its inputs; a backward
// its gradients (counted by the plan as part of that backward, so left out of `waiting`).
void walk_received_ahead(const Schedule& schedule,
                         const std::function<void(int, const Waiting&)>& at) {
  for (const auto& row : schedule.device_actions) {
    std::vector<Waiting> waiting(schedule.num_stages);
    for (const Action& a : row) {
      if (a.stage < 0 || a.stage >= schedule.num_stages) continue;
      Waiting& w = waiting[a.stage];
      if (a.kind == Kind::kRecv) {
        w.insert({a.microbatch, a.peer, a.op == Op::kForward ? Op::kForward : Op::kBackward});
        continue;
      }
      if (a.kind != Kind::kCompute || a.op == Op::kWeight) continue;
      const Op uses = a.op == Op::kForward ? Op::kForward : Op::kBackward;
      for (auto it = w.begin(); it != w.end();) {
        it = it->microbatch == a.microbatch && it->op == uses ? w.erase(it) : std::next(it);
      }
      if (uses == Op::kBackward) at(a.stage, w);
    }
  }
}

bool is_backward(const Action& a) {
  return a.kind == Kind::kCompute && (a.op == Op::kBackward || a.op == Op::kInput);
}

}  // namespace

std::vector<double> peak_received_ahead(const Schedule& schedule,
                                        const std::function<double(int, int, Op)>& weight) {
  std::vector<double> peak(schedule.num_stages, 0);
  walk_received_ahead(schedule, [&](int stage, const Waiting& w) {
    double held = 0;
    for (const Held& h : w) held += weight(stage, h.from, h.op);
    peak[stage] = std::max(peak[stage], held);
  });
  return peak;
}

std::vector<double> peak_sent_unreceived(
    const Schedule& schedule, const StageGraph& graph,
    const std::function<double(int stage, int peer, Op op)>& weight) {
  const ScheduleIndex index(schedule, graph);
  const auto& rows = schedule.device_actions;
  const int devices = static_cast<int>(rows.size());
  // Vector clocks: seen[d][i][e] = how many of device e's first actions happen before action
  // i of device d, or are it. Device order, and a send before its recv, are all there is.
  std::vector<std::vector<std::vector<int>>> seen(devices);
  std::vector<int> pos(devices, 0);
  for (int d = 0; d < devices; ++d) seen[d].resize(rows[d].size());
  for (bool progress = true; progress;) {
    progress = false;
    for (int d = 0; d < devices; ++d) {
      for (; pos[d] < static_cast<int>(rows[d].size()); ++pos[d]) {
        const Action& a = rows[d][pos[d]];
        const Slot* send = a.kind == Kind::kRecv ? index.find(index.partner(a)) : nullptr;
        if (send && pos[send->device] <= send->index) break;  // its send has not run yet
        std::vector<int> clock = pos[d] > 0 ? seen[d][pos[d] - 1] : std::vector<int>(devices, 0);
        if (send) {
          const std::vector<int>& other = seen[send->device][send->index];
          for (int e = 0; e < devices; ++e) clock[e] = std::max(clock[e], other[e]);
        }
        clock[d] = pos[d] + 1;
        seen[d][pos[d]] = std::move(clock);
        progress = true;
      }
    }
  }
  for (int d = 0; d < devices; ++d) {
    TANDEM_CHECK(pos[d] == static_cast<int>(rows[d].size()),
                 "the schedule cannot run to its end: d{} stops at {} (lower it and validate it)",
                 d, to_string(rows[d][pos[d]]));
  }
  std::vector<double> peak(schedule.num_stages, 0);
  for (int d = 0; d < devices; ++d) {
    for (int i = 0; i < static_cast<int>(rows[d].size()); ++i) {
      const Action& c = rows[d][i];
      if (!is_backward(c) || c.stage < 0 || c.stage >= schedule.num_stages) continue;
      double held = 0;
      for (int j = 0; j < i; ++j) {
        const Action& m = rows[d][j];
        if (m.kind != Kind::kSend || m.stage != c.stage) continue;
        const Slot* recv = index.find(index.partner(m));
        if (recv && seen[d][i][recv->device] > recv->index) continue;  // received by now
        held += weight(m.stage, m.peer, m.op);
      }
      peak[c.stage] = std::max(peak[c.stage], held);
    }
  }
  return peak;
}

}  // namespace tandem::schedule
