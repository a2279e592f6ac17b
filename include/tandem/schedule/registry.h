// Schedules by name. Everything that chooses by a schedule's name (the command line, the trainer,
// the memory partition, the runtime, the MPI launch) asks this registry: a schedule is one
// ScheduleKind, tandem's own one file each in src/schedule/kinds/, a program's own added with
// register_schedule() before it builds a Pipeline or a Trainer.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/schedule/generators.h"

namespace tandem::schedule {

struct ScheduleKind {
  std::string name;
  std::string summary;  // one line, for --help
  // Stages on each device: 1 (a stage per device: Options::stages is the stage count), a fixed
  // count (zb-v: 2), or 0 for Options::virtual_stages (interleaved). With any other than 1 the
  // generator places the stages itself and Options::stages is the device count.
  int stages_per_device = 1;
  std::function<Schedule(const Options&)> make;
};

// Adds a schedule; throws tandem::Error when the name is taken or the kind is incomplete.
void register_schedule(ScheduleKind kind);

// The schedule of that name; unknown names throw tandem::Error listing the known ones.
const ScheduleKind& schedule_kind(std::string_view name);

// Every registered name, tandem's own first (1f1b, forward-only, gpipe, interleaved, sequential,
// zb-h1, zb-v: their files' order), then a program's own in the order registered.
std::vector<std::string> schedule_names();

// The stages each device runs under that schedule with --virtual-stages v.
int stages_per_device(std::string_view name, int virtual_stages);

// Whether the schedule places its stages on the devices itself (more than one per device).
bool places_own_stages(std::string_view name);

// The schedule of that name for Options (read as ScheduleKind says). Unknown names and impossible
// combinations throw tandem::Error with the values and the valid choices.
Schedule make(std::string_view name, const Options& options);

}  // namespace tandem::schedule
