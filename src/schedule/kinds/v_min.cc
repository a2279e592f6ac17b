// --schedule v-min: zb-v's V with each device's held micro-batches capped (generators.h).
#include "tandem/schedule/registry.h"

namespace tandem::schedule {

ScheduleKind schedule_kind_v_min() {
  return {"v-min", "V-Min: zb-v's V holding about a third of 1F1B's activations",
          2,  // two per device
          [](const Options& o) { return v_min(o.stages, o.microbatches); }};
}

}  // namespace tandem::schedule
