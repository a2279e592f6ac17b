// Schedules by name: tandem's own, and those a program registers.
#include "tandem/schedule/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <deque>
#include <mutex>

#include "tandem/common/check.h"

namespace tandem::schedule {

// tandem's own schedules: one function per file of src/schedule/kinds/.
#define TANDEM_KIND(id) ScheduleKind schedule_kind_##id();
#include "schedule/schedule_kinds.inc"
#undef TANDEM_KIND

namespace {

// tandem's own, listed by the build (cmake: tandem_kind_list) in the generated file included
// here, in the files' order.
std::deque<ScheduleKind> builtin() {
  std::deque<ScheduleKind> out;
#define TANDEM_KIND(id) out.push_back(schedule_kind_##id());
#include "schedule/schedule_kinds.inc"
#undef TANDEM_KIND
  return out;
}

struct Registry {
  std::mutex mu;
  std::deque<ScheduleKind> kinds = builtin();  // a deque: entries stay where they are

  const ScheduleKind* find(std::string_view name) {
    for (const ScheduleKind& k : kinds)
      if (k.name == name) return &k;
    return nullptr;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

// The names of the schedules that place several stages on a device, for messages.
std::string names_placing_own_stages() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const ScheduleKind& k : r.kinds)
    if (k.stages_per_device != 1) out.push_back(k.name);
  if (out.size() < 2) return out.empty() ? std::string() : out.front();
  const std::string last = out.back();
  out.pop_back();
  return fmt::format("{} and {}", fmt::join(out, ", "), last);
}

}  // namespace

void register_schedule(ScheduleKind kind) {
  TANDEM_CHECK(!kind.name.empty(), "register_schedule: the schedule needs a name");
  TANDEM_CHECK(static_cast<bool>(kind.make), "register_schedule: schedule '{}' has no generator",
               kind.name);
  TANDEM_CHECK(kind.stages_per_device >= 0,
               "register_schedule: schedule '{}' has {} stages per device; give 1, a count, or 0 "
               "for the virtual stages",
               kind.name, kind.stages_per_device);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  TANDEM_CHECK(!r.find(kind.name), "register_schedule: a schedule named '{}' exists already",
               kind.name);
  r.kinds.push_back(std::move(kind));
}

std::vector<std::string> schedule_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const ScheduleKind& k : r.kinds) out.push_back(k.name);
  return out;
}

const ScheduleKind& schedule_kind(std::string_view name) {
  const ScheduleKind* k = nullptr;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    k = r.find(name);
  }
  TANDEM_CHECK(k, "unknown schedule '{}'; valid names: {}.", name,
               fmt::join(schedule_names(), ", "));
  return *k;
}

int stages_per_device(std::string_view name, int virtual_stages) {
  const int n = schedule_kind(name).stages_per_device;
  return n == 0 ? virtual_stages : n;
}

bool places_own_stages(std::string_view name) { return schedule_kind(name).stages_per_device != 1; }

Schedule make(std::string_view name, const Options& options) {
  const ScheduleKind& kind = schedule_kind(name);
  const int stages = options.stages, m = options.microbatches, v = options.virtual_stages;
  TANDEM_CHECK(stages >= 1, "schedule '{}' needs at least 1 stage; got stages={}.", name, stages);
  TANDEM_CHECK(m >= 1, "schedule '{}' needs at least 1 micro-batch; got microbatches={}.", name, m);
  TANDEM_CHECK(v >= 1, "schedule '{}' needs virtual_stages >= 1; got virtual_stages={}.", name, v);
  const int per_device = kind.stages_per_device;
  TANDEM_CHECK(per_device != 1 || v == 1,
               "{} virtual stages per device only apply to {}; schedule '{}' runs one stage per "
               "device (leave Options::virtual_stages at 1).",
               v, names_placing_own_stages(), name);
  TANDEM_CHECK(per_device <= 1 || v == 1 || v == per_device,
               "{} always runs {} stages per device; got {} virtual stages (use "
               "Options::virtual_stages = 1 or {}).",
               name, per_device, v, per_device);
  return kind.make(options);
}

}  // namespace tandem::schedule
