// --schedule interleaved: 1F1B over --virtual-stages chunks per device (Megatron-LM)
// (generators.h).
#include "tandem/schedule/registry.h"

namespace tandem::schedule {

ScheduleKind schedule_kind_interleaved() {
  return {"interleaved", "1F1B over --virtual-stages chunks per device (Megatron-LM)",
          0,  // --virtual-stages per device
          [](const Options& o) { return interleaved(o.stages, o.virtual_stages, o.microbatches); }};
}

}  // namespace tandem::schedule
