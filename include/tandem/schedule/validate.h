// Checks a schedule before any tensor moves.
#pragma once

#include <string_view>

#include "tandem/common/check.h"
#include "tandem/schedule/schedule.h"
#include "tandem/schedule/stage_graph.h"

namespace tandem::schedule {

// Throws tandem::Error if `schedule` cannot run one training step of `graph`. The message says
// what is wrong, names the offending action and ends with format_grid() marking it. In order:
//  1. shape: stages match the graph, every stage on a device in [0, num_devices), one row per
//     device, at least one micro-batch;
//  2. every action names stages and a micro-batch in range and sits on the device of its stage;
//     no action appears twice;
//  3. every F(s,m) exactly once; backward either absent for all (evaluation) or, for every
//     (s,m), B once or I and W once each;
//  4. every compute action comes after what it waits for (ScheduleIndex::inputs) when that is on
//     its own device; W after I;
//  5. compute-only schedules: the device lists can run together when sends are buffered
//     (no cycle of devices waiting on each other);
//  6. lowered schedules (with send/recv): each send follows the compute it names and each recv
//     precedes it; messages follow graph edges between different devices; every send has
//     exactly one matching recv and the reverse; every input from another device arrives by a
//     recv before the compute that needs it; and the lists run to the end when every send
//     blocks until the receiver reaches the matching recv (rendezvous).
void validate(const Schedule& schedule, const StageGraph& graph);

// The error validate() throws, for other code that reports a problem at one action (e.g. the
// runtime when an action fails): `what`, a newline, then the grid with `mark` marked.
Error error_at(const Schedule& schedule, const Action* mark, std::string_view what);

}  // namespace tandem::schedule
