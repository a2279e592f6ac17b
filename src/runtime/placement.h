// Puts a schedule's stages on devices when a device holds several stages (explicit placement,
// more stages than devices): each device's list is the merge of its stages' actions in the
// order of the schedule's own unit-cost timeline, which keeps every dependency in order.
// Private to the runtime.
#pragma once

#include "schedule/index.h"
#include "schedule/lower.h"
#include "schedule/replay.h"
#include "tandem/schedule/all.h"

namespace tandem::runtime {

schedule::Schedule place_stages(const schedule::Schedule& s, const schedule::StageGraph& graph,
                                const std::vector<int>& stage_device, int num_devices);

}  // namespace tandem::runtime
