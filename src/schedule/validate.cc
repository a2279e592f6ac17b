#include "tandem/schedule/validate.h"

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "schedule/index.h"
#include "schedule/replay.h"

namespace tandem::schedule {

Error error_at(const Schedule& schedule, const Action* mark, std::string_view what) {
  return Error(fmt::format("{}\n{}", what, format_grid(schedule, mark)));
}

namespace {

bool contains(const std::vector<int>& list, int value) {
  for (int v : list) {
    if (v == value) return true;
  }
  return false;
}

class Validator {
 public:
  Validator(const Schedule& schedule, const StageGraph& graph) : s_(schedule), graph_(graph) {}

  void run() {
    check_shape();
    index_ = std::make_unique<ScheduleIndex>(s_, graph_);
    check_actions();
    check_coverage();
    check_local_order();
    check_runs_to_end(is_lowered(s_) ? Sends::kRendezvous : Sends::kBuffered);
  }

 private:
  [[noreturn]] void fail(const Action* mark, const std::string& what) const {
    throw error_at(s_, mark, fmt::format("schedule '{}' is invalid: {}", s_.name, what));
  }
  int device_of(int stage) const { return s_.stage_device[stage]; }
  const Action& at(int device, int index) const { return s_.device_actions[device][index]; }
  const Slot& slot(const Action& a) const { return *index_->find(a); }

  void check_shape() const {
    check_graph(graph_);
    if (s_.num_stages != graph_.num_stages) {
      fail(nullptr, fmt::format("it has {} stages but the stage graph has {}.", s_.num_stages,
                                graph_.num_stages));
    }
    if (s_.num_microbatches < 1 || s_.num_devices < 1) {
      fail(nullptr, fmt::format("it needs at least 1 micro-batch and 1 device; has {} and {}.",
                                s_.num_microbatches, s_.num_devices));
    }
    if (static_cast<int>(s_.device_actions.size()) != s_.num_devices) {
      fail(nullptr, fmt::format("it has {} devices but {} action lists.", s_.num_devices,
                                s_.device_actions.size()));
    }
    if (static_cast<int>(s_.stage_device.size()) != s_.num_stages) {
      fail(nullptr, fmt::format("stage_device places {} stages but there are {}.",
                                s_.stage_device.size(), s_.num_stages));
    }
    for (int stage = 0; stage < s_.num_stages; ++stage) {
      if (s_.stage_device[stage] < 0 || s_.stage_device[stage] >= s_.num_devices) {
        fail(nullptr, fmt::format("stage {} is placed on device {}, outside 0..{}.", stage,
                                  s_.stage_device[stage], s_.num_devices - 1));
      }
    }
  }

  void check_actions() const {
    for (int d = 0; d < s_.num_devices; ++d) {
      for (int i = 0; i < static_cast<int>(s_.device_actions[d].size()); ++i) {
        const Action& a = at(d, i);
        const std::string text = to_string(a);
        bool is_comm = a.kind != Kind::kCompute;
        if (a.stage < 0 || a.stage >= s_.num_stages ||
            (is_comm && (a.peer < 0 || a.peer >= s_.num_stages))) {
          fail(&a, fmt::format("{} names a stage outside 0..{}.", text, s_.num_stages - 1));
        }
        if (a.microbatch < 0 || a.microbatch >= s_.num_microbatches) {
          fail(&a, fmt::format("{} names micro-batch {}, outside 0..{}.", text, a.microbatch,
                               s_.num_microbatches - 1));
        }
        if (device_of(a.stage) != d) {
          fail(&a, fmt::format("{} is on d{}, but stage {} runs on d{}.", text, d, a.stage,
                               device_of(a.stage)));
        }
        const Slot& first = slot(a);
        if (first.device != d || first.index != i) {
          fail(&a, fmt::format("{} appears {} times; every action appears once.", text,
                               index_->count(a)));
        }
        if (is_comm) check_message_edge(a);
      }
    }
  }

  // A send or receive must follow a graph edge between stages on different devices.
  void check_message_edge(const Action& a) const {
    const std::string text = to_string(a);
    if (a.op == Op::kWeight) fail(&a, fmt::format("{}: W actions never send or receive.", text));
    const int from = a.kind == Kind::kSend ? a.stage : a.peer;
    const int to = a.kind == Kind::kSend ? a.peer : a.stage;
    // Forward data flows producer -> consumer; backward data consumer -> producer.
    const int producer = a.op == Op::kForward ? from : to;
    const int consumer = a.op == Op::kForward ? to : from;
    if (!contains(graph_.consumers[producer], consumer)) {
      fail(&a, fmt::format("{}: stage {} does not consume the outputs of stage {} (graph: {}).",
                           text, consumer, producer, to_string(graph_)));
    }
    if (device_of(from) == device_of(to)) {
      fail(&a, fmt::format("{}: stages {} and {} are both on d{}; they share tensors without "
                           "messages.",
                           text, from, to, device_of(from)));
    }
  }

  void check_coverage() const {
    bool has_backward = false;
    for (const auto& row : s_.device_actions) {
      for (const Action& a : row) has_backward |= a.kind == Kind::kCompute && a.op != Op::kForward;
    }
    for (int stage = 0; stage < s_.num_stages; ++stage) {
      for (int mb = 0; mb < s_.num_microbatches; ++mb) {
        auto has = [&](Op op) { return index_->find(compute_action(stage, op, mb)) != nullptr; };
        auto name = [&](Op op) { return to_string(compute_action(stage, op, mb)); };
        if (!has(Op::kForward)) {
          fail(nullptr, fmt::format("{} is missing (stage {} runs on d{}).", name(Op::kForward),
                                    stage, device_of(stage)));
        }
        if (!has_backward) continue;
        const bool b = has(Op::kBackward), i = has(Op::kInput), w = has(Op::kWeight);
        if (b && (i || w)) {
          const Action extra = compute_action(stage, i ? Op::kInput : Op::kWeight, mb);
          fail(index_->find(extra) ? &at(slot(extra).device, slot(extra).index) : nullptr,
               fmt::format("{} and {} both present; run B, or I and W, once.", name(Op::kBackward),
                           to_string(extra)));
        }
        if (!b && !i && !w) {
          fail(nullptr,
               fmt::format("the backward of stage {} micro-batch {} is missing: expected "
                           "{}, or {} and {}.",
                           stage, mb, name(Op::kBackward), name(Op::kInput), name(Op::kWeight)));
        }
        if (i != w) {
          fail(nullptr,
               fmt::format("{} is missing ({} is there).", name(i ? Op::kWeight : Op::kInput),
                           name(i ? Op::kInput : Op::kWeight)));
        }
      }
    }
  }

  // What can be checked on one device's list alone.
  void check_local_order() const {
    const bool lowered = is_lowered(s_);
    for (int d = 0; d < s_.num_devices; ++d) {
      for (int i = 0; i < static_cast<int>(s_.device_actions[d].size()); ++i) {
        const Action& a = at(d, i);
        const std::string text = to_string(a);
        if (a.kind == Kind::kCompute) {
          for (const Action& need : index_->inputs(a)) {
            if (device_of(need.stage) == d) {
              if (slot(need).index > i) {
                fail(&a, fmt::format("{} on d{} comes before {}, which it needs.", text, d,
                                     to_string(need)));
              }
            } else if (lowered) {
              const Action recv = recv_action(a, need.stage);
              const Slot* r = index_->find(recv);
              if (r == nullptr || r->index > i) {
                fail(&a,
                     fmt::format("{} on d{} needs what {} on d{} produces, but no {} comes "
                                 "before it.",
                                 text, d, to_string(need), device_of(need.stage), to_string(recv)));
              }
            }
          }
          continue;
        }
        const Action work = compute_of(a);
        const Slot* w = index_->find(work);
        if (w == nullptr) {
          fail(&a, fmt::format("{} belongs to {}, which the schedule does not run.", text,
                               to_string(work)));
        }
        if (a.kind == Kind::kSend && w->index > i) {
          fail(&a, fmt::format("{} on d{} comes before {}, which produces what it sends.", text, d,
                               to_string(work)));
        }
        if (a.kind == Kind::kRecv && w->index < i) {
          fail(&a, fmt::format("{} on d{} comes after {}, which needs what it receives.", text, d,
                               to_string(work)));
        }
        const Action other = index_->partner(a);
        if (index_->find(other) == nullptr) {
          fail(&a, fmt::format("{} has no matching {} on d{}.", text, to_string(other),
                               device_of(other.stage)));
        }
      }
    }
  }

  // Runs the lists against each other; a stuck device is a cycle of devices waiting.
  void check_runs_to_end(Sends sends) const {
    const std::vector<Stall> stalls = replay(s_, *index_, sends);
    if (stalls.empty()) return;
    std::string waits;
    for (const Stall& stall : stalls) {
      const Action& a = at(stall.device, stall.index);
      waits += sends == Sends::kBuffered
                   ? fmt::format(" d{} waits at {} for {} on d{};", stall.device, to_string(a),
                                 to_string(stall.waits_for), device_of(stall.waits_for.stage))
                   : fmt::format(" d{} is blocked at {} until d{} reaches {};", stall.device,
                                 to_string(a), device_of(stall.waits_for.stage),
                                 to_string(stall.waits_for));
    }
    waits.back() = '.';
    const Action* mark = &at(stalls.front().device, stalls.front().index);
    fail(mark, sends == Sends::kBuffered
                   ? "its dependencies form a cycle between devices:" + waits
                   : "it deadlocks when every send blocks until its receive is reached:" + waits);
  }

  const Schedule& s_;
  const StageGraph& graph_;
  std::unique_ptr<ScheduleIndex> index_;
};

}  // namespace

void validate(const Schedule& schedule, const StageGraph& graph) {
  Validator(schedule, graph).run();
}

}  // namespace tandem::schedule
