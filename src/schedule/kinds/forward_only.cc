// --schedule forward-only: forwards only (evaluation) (generators.h).
#include "tandem/schedule/registry.h"

namespace tandem::schedule {

ScheduleKind schedule_kind_forward_only() {
  return {"forward-only", "forwards only (evaluation)", 1,  // one stage per device
          [](const Options& o) { return forward_only(o.stages, o.microbatches); }};
}

}  // namespace tandem::schedule
