// Runs the device lists of a schedule against each other, without time, the way the devices
// would: to find out whether they all reach their ends. validate() uses it; it assumes the
// local checks of validate() passed (every action once, inputs present).
#pragma once

#include <vector>

#include "schedule/index.h"
#include "tandem/schedule/schedule.h"

namespace tandem::schedule {

enum class Sends {
  kBuffered,    // a send never waits; a recv waits until its send has run; a compute waits
                // until its inputs (on any device) have run
  kRendezvous,  // a send and its recv complete together once both devices have reached them;
                // a compute waits only for earlier actions on its own device
};

// One device that could not go on: it is at `device_actions[device][index]` and needs `waits_for`
// (for kBuffered an input of that compute; for kRendezvous the other end of the message).
struct Stall {
  int device = 0;
  int index = 0;
  Action waits_for;
};

// Empty if every list runs to its end; else every stuck device, ascending.
std::vector<Stall> replay(const Schedule& schedule, const ScheduleIndex& index, Sends sends);

}  // namespace tandem::schedule
