// --schedule zb-h1: zero bubble H1: weight gradients fill the cool-down (generators.h).
#include "tandem/schedule/registry.h"

namespace tandem::schedule {

ScheduleKind schedule_kind_zb_h1() {
  return {"zb-h1", "zero bubble H1: weight gradients fill the cool-down",
          1,  // one stage per device
          [](const Options& o) { return zb_h1(o.stages, o.microbatches); }};
}

}  // namespace tandem::schedule
