// --schedule sequential: one micro-batch at a time through every stage (the reference)
// (generators.h).
#include "tandem/schedule/registry.h"

namespace tandem::schedule {

ScheduleKind schedule_kind_sequential() {
  return {"sequential", "one micro-batch at a time through every stage (the reference)",
          1,  // one stage per device
          [](const Options& o) { return sequential(o.stages, o.microbatches); }};
}

}  // namespace tandem::schedule
