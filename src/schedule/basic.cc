// The schedules with one stage per device: sequential, gpipe, 1f1b, forward-only.
#include <algorithm>

#include "tandem/common/check.h"
#include "tandem/schedule/generators.h"

namespace tandem::schedule {
namespace {

Schedule one_stage_per_device(const char* name, int stages, int microbatches) {
  TANDEM_CHECK(stages >= 1, "{} needs at least 1 stage; got stages={}.", name, stages);
  TANDEM_CHECK(microbatches >= 1, "{} needs at least 1 micro-batch; got microbatches={}.", name,
               microbatches);
  Schedule s;
  s.name = name;
  s.num_stages = stages;
  s.num_microbatches = microbatches;
  s.num_devices = stages;
  for (int stage = 0; stage < stages; ++stage) s.stage_device.push_back(stage);
  s.device_actions.resize(stages);
  return s;
}

Action f(int stage, int mb) { return compute_action(stage, Op::kForward, mb); }
Action b(int stage, int mb) { return compute_action(stage, Op::kBackward, mb); }

}  // namespace

Schedule sequential(int stages, int microbatches) {
  Schedule s = one_stage_per_device("sequential", stages, microbatches);
  for (int stage = 0; stage < stages; ++stage) {
    for (int mb = 0; mb < microbatches; ++mb) {
      s.device_actions[stage].push_back(f(stage, mb));
      s.device_actions[stage].push_back(b(stage, mb));
    }
  }
  return s;
}

Schedule gpipe(int stages, int microbatches) {
  Schedule s = one_stage_per_device("gpipe", stages, microbatches);
  for (int stage = 0; stage < stages; ++stage) {
    for (int mb = 0; mb < microbatches; ++mb) s.device_actions[stage].push_back(f(stage, mb));
    for (int mb = 0; mb < microbatches; ++mb) s.device_actions[stage].push_back(b(stage, mb));
  }
  return s;
}

Schedule one_f_one_b(int stages, int microbatches) {
  Schedule s = one_stage_per_device("1f1b", stages, microbatches);
  for (int stage = 0; stage < stages; ++stage) {
    std::vector<Action>& list = s.device_actions[stage];
    const int warmup = std::min(stages - stage - 1, microbatches);
    for (int mb = 0; mb < warmup; ++mb) list.push_back(f(stage, mb));
    for (int k = 0; warmup + k < microbatches; ++k) {
      list.push_back(f(stage, warmup + k));
      list.push_back(b(stage, k));
    }
    for (int mb = microbatches - warmup; mb < microbatches; ++mb) list.push_back(b(stage, mb));
  }
  return s;
}

Schedule forward_only(int stages, int microbatches) {
  Schedule s = one_stage_per_device("forward-only", stages, microbatches);
  for (int stage = 0; stage < stages; ++stage) {
    for (int mb = 0; mb < microbatches; ++mb) s.device_actions[stage].push_back(f(stage, mb));
  }
  return s;
}

}  // namespace tandem::schedule
