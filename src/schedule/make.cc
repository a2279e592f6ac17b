// Generators by name, for the command line and configuration files.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tandem/common/check.h"
#include "tandem/schedule/generators.h"

namespace tandem::schedule {

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {
      "sequential", "gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "forward-only"};
  return names;
}

Schedule make(std::string_view name, const Options& options) {
  const int stages = options.stages, m = options.microbatches, v = options.virtual_stages;
  TANDEM_CHECK(stages >= 1, "schedule '{}' needs at least 1 stage; got stages={}.", name, stages);
  TANDEM_CHECK(m >= 1, "schedule '{}' needs at least 1 micro-batch; got microbatches={}.", name, m);
  TANDEM_CHECK(v >= 1, "schedule '{}' needs virtual_stages >= 1; got virtual_stages={}.", name, v);
  if (name == "interleaved") return interleaved(stages, v, m);  // stages = devices here
  if (name == "zb-v") {
    TANDEM_CHECK(v == 1 || v == 2,
                 "zb-v always runs 2 stages per device; got {} virtual stages (use "
                 "--virtual-stages 1 or 2).",
                 v);
    return zb_v(stages, m);  // stages = devices here
  }
  const bool known = name == "sequential" || name == "gpipe" || name == "1f1b" || name == "zb-h1" ||
                     name == "forward-only";
  TANDEM_CHECK(known, "unknown schedule '{}'; valid names: {}.", name,
               fmt::join(schedule_names(), ", "));
  TANDEM_CHECK(v == 1,
               "{} virtual stages per device only apply to interleaved and zb-v; schedule '{}' "
               "runs one stage per device (leave --virtual-stages at 1).",
               v, name);
  if (name == "sequential") return sequential(stages, m);
  if (name == "gpipe") return gpipe(stages, m);
  if (name == "1f1b") return one_f_one_b(stages, m);
  if (name == "zb-h1") return zb_h1(stages, m);
  return forward_only(stages, m);
}

}  // namespace tandem::schedule
