// Lowering: adds the send/recv actions a schedule needs on a given stage graph.
#pragma once

#include "tandem/schedule/schedule.h"
#include "tandem/schedule/simulate.h"
#include "tandem/schedule/stage_graph.h"

namespace tandem::schedule {

// Returns `schedule` with, for every input a compute action takes from a stage on another device
// (ScheduleIndex::inputs), a send after the producer on its device and a recv before the
// consumer on its device. Stages on one device exchange nothing. Existing send/recv actions are
// dropped first, so lower(lower(s)) == lower(s). Throws tandem::Error if the compute order is
// invalid (see validate()).
//
// Order. Simulating the compute-only schedule under `reference` costs gives each message a time
// T = the end of its producer. Each device merges its computes (at their start times) with its
// sends and recvs (at T; before a compute starting at the same time; among themselves by
// (T, from stage, to stage, micro-batch)). Then every device meets its messages in one global
// order, and compute actions never wait (their recvs come first), so no device can wait for a
// device that waits for it: the result cannot deadlock even when every send blocks until its
// recv is reached, and it passes validate(). Last, each send moves up to just after its
// producer and each recv down to just before its consumer, never past another message (so the
// message order, and the argument, stay).
//
// Cost. With buffered sends, in the reference timeline with reference.comm = 0 no recv delays
// anything: the lowered schedule simulates exactly like the compute-only one. When real costs
// differ from `reference`, a recv can wait on data that another order would have let the
// device overlap with compute: e.g. interleaved p=4, V=4, m=16 ordered for F=1, B=2 has a
// simulated bubble of 0.045 at F=1, B=2 but 0.123 at F=B=1 (0.045 when ordered for F=B=1).
// Pass measured costs when there are any. (Blocking sends force one message order per device;
// that order can only be right for some timings.)
// (Fixed local rules fail already on 1F1B with 2 stages and 2 micro-batches: posting the
// previous compute's sends before the next compute's recvs deadlocks when sends block; posting
// the recvs first makes a cycle even when sends are buffered. Megatron-LM posts both at once,
// non-blocking; here each is one blocking action. See tests/schedule/validate_test.cc.)
Schedule lower(const Schedule& schedule, const StageGraph& graph);
// Same, ordered by the timeline under `reference`; its compute costs must be positive.
Schedule lower(const Schedule& schedule, const StageGraph& graph, const Costs& reference);

}  // namespace tandem::schedule
