// Lookup over one schedule: where each action sits and what each compute action waits for.
// Shared by validate(), lower() and simulate(); the runtime may use it the same way.
#pragma once

#include <unordered_map>
#include <vector>

#include "tandem/schedule/action.h"
#include "tandem/schedule/schedule.h"
#include "tandem/schedule/stage_graph.h"

namespace tandem::schedule {

struct Slot {
  int device = -1;
  int index = -1;  // position in device_actions[device]
};

// Copies what it needs; the schedule and graph may go away afterwards. Not thread-safe to build,
// safe to read from several threads.
class ScheduleIndex {
 public:
  // Stage numbers outside the graph are tolerated (validate() reports them).
  ScheduleIndex(const Schedule& schedule, const StageGraph& graph);

  // The first slot (by device, then position) holding `action`, or nullptr.
  const Slot* find(const Action& action) const;
  // How many times `action` occurs in the schedule.
  int count(const Action& action) const;
  // The device that owns `stage`.
  int device_of(int stage) const { return stage_device_[stage]; }

  // The op that carries backward for (stage, micro-batch): kInput if the schedule holds
  // I(stage, micro-batch), else kBackward.
  Op backward_op(int stage, int microbatch) const;

  // The other end of a send or receive: 1F3>2 <-> 2F3<1; 2B3>1 <-> 1B3<2 (or 1I3<2 when stage 1
  // splits its backward, which backward_op() tells).
  Action partner(const Action& message) const;

  // The compute actions `compute` waits for:
  //   F(s,m)    after F(q,m) for every producer q of s            (data: q's outputs)
  //   B|I(s,m)  after F(s,m), and after B|I(t,m) for every consumer t of s
  //                                                              (data: d(loss)/d(outputs of s))
  //   W(s,m)    after I(s,m)
  // Entries on another device are exactly the ones that need a message.
  std::vector<Action> inputs(const Action& compute) const;

 private:
  std::vector<int> stage_device_;
  std::vector<std::vector<int>> consumers_;
  std::vector<std::vector<int>> producers_;
  std::unordered_map<Action, Slot, ActionHash> first_;
  std::unordered_map<Action, int, ActionHash> count_;
};

}  // namespace tandem::schedule
