#include "schedule/index.h"

namespace tandem::schedule {

ScheduleIndex::ScheduleIndex(const Schedule& schedule, const StageGraph& graph)
    : stage_device_(schedule.stage_device),
      consumers_(graph.consumers),
      producers_(graph.producers()) {
  for (int d = 0; d < static_cast<int>(schedule.device_actions.size()); ++d) {
    const auto& row = schedule.device_actions[d];
    for (int i = 0; i < static_cast<int>(row.size()); ++i) {
      first_.emplace(row[i], Slot{d, i});
      ++count_[row[i]];
    }
  }
}

const Slot* ScheduleIndex::find(const Action& action) const {
  auto it = first_.find(action);
  return it == first_.end() ? nullptr : &it->second;
}

int ScheduleIndex::count(const Action& action) const {
  auto it = count_.find(action);
  return it == count_.end() ? 0 : it->second;
}

Op ScheduleIndex::backward_op(int stage, int microbatch) const {
  return find(compute_action(stage, Op::kInput, microbatch)) ? Op::kInput : Op::kBackward;
}

Action ScheduleIndex::partner(const Action& message) const {
  Action other{message.kind == Kind::kSend ? Kind::kRecv : Kind::kSend, message.peer, Op::kForward,
               message.microbatch, message.stage};
  if (message.op != Op::kForward) other.op = backward_op(message.peer, message.microbatch);
  return other;
}

std::vector<Action> ScheduleIndex::inputs(const Action& compute) const {
  const int s = compute.stage, m = compute.microbatch;
  std::vector<Action> result;
  if (s < 0 || s >= static_cast<int>(consumers_.size())) return result;
  switch (compute.op) {
    case Op::kForward:
      for (int q : producers_[s]) result.push_back(compute_action(q, Op::kForward, m));
      break;
    case Op::kBackward:
    case Op::kInput:
      result.push_back(compute_action(s, Op::kForward, m));
      for (int t : consumers_[s]) result.push_back(compute_action(t, backward_op(t, m), m));
      break;
    case Op::kWeight:
      result.push_back(compute_action(s, Op::kInput, m));
      break;
  }
  return result;
}

}  // namespace tandem::schedule
