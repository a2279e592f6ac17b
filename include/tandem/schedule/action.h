// The vocabulary of a schedule: one Action is one unit of work on one device.
//
//   text     kind     meaning
//   1F3      compute  stage 1 runs forward on micro-batch 3
//   0B2      compute  stage 0 runs the whole backward of micro-batch 2
//   2I0      compute  stage 2 runs the input half of backward: d(loss)/d(inputs of stage 2)
//   3W1      compute  stage 3 runs the weight half of backward: d(loss)/d(weights of stage 3)
//   1F3>2    send     after 1F3, stage 1 sends its outputs of micro-batch 3 to stage 2
//   2F3<1    recv     before 2F3, stage 2 receives its inputs of micro-batch 3 from stage 1
//   2B3>1    send     after 2B3 (or 2I3, written 2I3>1), d(loss)/d(inputs of stage 2) to stage 1
//   1B3<2    recv     before 1B3 (or 1I3, written 1I3<2), d(loss)/d(outputs of stage 1) from 2
//
// A send names the compute action that produced the data; a receive names the compute action
// that consumes it. Both live on the device that owns `stage`. W actions never communicate.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <string_view>

namespace tandem::schedule {

// The letter is the printed form.
enum class Op : char { kForward = 'F', kBackward = 'B', kInput = 'I', kWeight = 'W' };
enum class Kind : char { kCompute, kSend, kRecv };

struct Action {
  Kind kind = Kind::kCompute;
  int stage = 0;
  Op op = Op::kForward;
  int microbatch = 0;
  int peer = -1;  // send/recv only: the other stage; -1 for compute actions

  bool operator==(const Action& other) const {
    return kind == other.kind && stage == other.stage && op == other.op &&
           microbatch == other.microbatch && peer == other.peer;
  }
  bool operator!=(const Action& other) const { return !(*this == other); }
};

// Hash for unordered containers keyed by Action.
struct ActionHash {
  std::size_t operator()(const Action& a) const;
};

Action compute_action(int stage, Op op, int microbatch);
// The send that carries the output of `producer` (a compute action) to stage `to_stage`.
Action send_action(const Action& producer, int to_stage);
// The receive that brings `consumer` (a compute action) its input from stage `from_stage`.
Action recv_action(const Action& consumer, int from_stage);

// The compute action behind a send or receive (the action itself for compute actions).
inline Action compute_of(const Action& a) {
  return Action{Kind::kCompute, a.stage, a.op, a.microbatch, -1};
}

// "1F3", "1F3>2", "2F3<1" (see the table above).
std::string to_string(const Action& action);
std::string to_string(Op op);
// Inverse of to_string. Throws tandem::Error naming the text when it is not an action.
Action parse_action(std::string_view text);

std::ostream& operator<<(std::ostream& out, const Action& action);

}  // namespace tandem::schedule
