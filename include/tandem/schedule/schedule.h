// A schedule: for every device, the ordered list of actions of one training step. It is data:
// generators (generators.h) build it, lower() adds messages, validate() checks it, simulate()
// times it, and the runtime walks one device's list. It prints as a grid, one row per device:
//
//   name=gpipe stages=2 microbatches=2 devices=2 stage_device=0,1
//   d0 | 0F0 0F1 0B0 0B1
//   d1 | 1F0 1F1 1B0 1B1
//
// Columns are list positions, not time (simulate() gives time).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/schedule/action.h"

namespace tandem::schedule {

struct Schedule {
  std::string name;  // format_grid prints whitespace and '|' in it as '_'
  int num_stages = 0;
  int num_microbatches = 0;
  int num_devices = 0;
  std::vector<int> stage_device;                    // stage -> device
  std::vector<std::vector<Action>> device_actions;  // per device, in execution order

  bool operator==(const Schedule& other) const;
  bool operator!=(const Schedule& other) const { return !(*this == other); }
};

// The grid above, one line per row, each ending in '\n'. With `mark`, that action is shown as
// [1F3] and a line with a caret under it follows its row. `mark` may point into
// schedule.device_actions (that one slot is marked) or elsewhere (every equal action is marked).
std::string format_grid(const Schedule& schedule, const Action* mark = nullptr);

// Inverse of format_grid: parse_grid(format_grid(s)) == s. Also reads hand-written grids:
// blank lines, '#' comments, caret lines and [marked] actions are accepted, and the header line
// may be left out, in which case name = "custom", devices = the number of rows, stages and
// micro-batches = 1 + the largest seen, and each stage sits on the first row that mentions it.
// Rows must be d0, d1, ... in order. Throws tandem::Error naming the line and the bad text.
Schedule parse_grid(std::string_view text);

// True if the schedule splits backward into I and W actions.
bool splits_backward(const Schedule& schedule);
// True if the schedule contains send/recv actions (it went through lower()).
bool is_lowered(const Schedule& schedule);
// The schedule without its send/recv actions.
Schedule compute_only(const Schedule& schedule);

// Per stage, the most micro-batches that are "in flight" at once on that stage: forward done,
// backward not yet finished (B done, or W done when backward is split), counted by walking the
// owning device's list. This is what bounds a stage's stored activations.
std::vector<int> peak_in_flight(const Schedule& schedule);

std::ostream& operator<<(std::ostream& out, const Schedule& schedule);

}  // namespace tandem::schedule
