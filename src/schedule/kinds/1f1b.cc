// --schedule 1f1b: one forward, one backward after a warm-up (PipeDream-flush) (generators.h).
#include "tandem/schedule/registry.h"

namespace tandem::schedule {

ScheduleKind schedule_kind_n1f1b() {
  return {"1f1b", "one forward, one backward after a warm-up (PipeDream-flush)",
          1,  // one stage per device
          [](const Options& o) { return one_f_one_b(o.stages, o.microbatches); }};
}

}  // namespace tandem::schedule
