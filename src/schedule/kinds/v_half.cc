// --schedule v-half: zb-v's V with each device's held micro-batches capped (generators.h).
#include "tandem/schedule/registry.h"

namespace tandem::schedule {

ScheduleKind schedule_kind_v_half() {
  return {"v-half", "V-Half: zb-v's V holding about half of 1F1B's activations",
          2,  // two per device
          [](const Options& o) { return v_half(o.stages, o.microbatches); }};
}

}  // namespace tandem::schedule
