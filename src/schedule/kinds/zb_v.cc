// --schedule zb-v: zero bubble V: 2 stages per device in a V (generators.h).
#include "tandem/schedule/registry.h"

namespace tandem::schedule {

ScheduleKind schedule_kind_zb_v() {
  return {"zb-v", "zero bubble V: 2 stages per device in a V", 2,  // two per device
          [](const Options& o) { return zb_v(o.stages, o.microbatches); }};
}

}  // namespace tandem::schedule
