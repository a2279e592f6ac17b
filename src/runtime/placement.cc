#include "placement.h"

#include <algorithm>

#include "tandem/common/check.h"

namespace tandem::runtime {

schedule::Schedule place_stages(const schedule::Schedule& s, const schedule::StageGraph& graph,
                                const std::vector<int>& stage_device, int num_devices) {
  TANDEM_ASSERT(static_cast<int>(stage_device.size()) == s.num_stages, "{} stages, {} placements",
                s.num_stages, stage_device.size());
  if (stage_device == s.stage_device && num_devices == s.num_devices) return s;
  const schedule::Timeline t =
      schedule::simulate(s, graph, schedule::Costs::uniform(s.num_stages));
  std::vector<schedule::TimedAction> order = t.actions;
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start, a.end) < std::tie(b.start, b.end);
  });
  schedule::Schedule out;
  out.name = s.name;
  out.num_stages = s.num_stages;
  out.num_microbatches = s.num_microbatches;
  out.num_devices = num_devices;
  out.stage_device = stage_device;
  out.device_actions.assign(num_devices, {});
  for (const auto& ta : order) {
    if (ta.action.kind != schedule::Kind::kCompute) continue;
    out.device_actions[stage_device[ta.action.stage]].push_back(ta.action);
  }
  return out;
}

}  // namespace tandem::runtime
