// --schedule gpipe: every forward, then every backward (generators.h).
#include "tandem/schedule/registry.h"

namespace tandem::schedule {

ScheduleKind schedule_kind_gpipe() {
  return {"gpipe", "every forward, then every backward", 1,  // one stage per device
          [](const Options& o) { return gpipe(o.stages, o.microbatches); }};
}

}  // namespace tandem::schedule
