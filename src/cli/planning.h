// What `tandem plan` and `tandem train --auto` share: the planner (train/planner.h) run on the
// command's model and data, with the options the command line gave held fixed.
#pragma once

#include <CLI/CLI.hpp>
#include <set>
#include <string>

#include "tandem/train/config.h"
#include "tandem/train/job.h"
#include "tandem/train/planner.h"

namespace tandem::cli {

// The Config fields the planner searches that `cmd`'s command line gave: they stay as given.
std::set<std::string> fixed_fields(const CLI::App& cmd);

// Plans `c` on `job`'s devices (under MPI one replica's ranks; collective): its data and model
// made as the trainer makes them, the costs measured with `repeats` repetitions. Each planned
// run keeps c's --devices and --threads-per-device, so that its command line is the one to
// type. Throws tandem::Error for configurations the planner cannot start from.
train::Planning plan_here(const train::Config& c, train::Job& job,
                          const std::set<std::string>& fixed, int repeats);

// Throws memory::DoesNotFit (status 3) when nothing of `p` fits c's budget, naming the smallest
// budget per device under which its leanest configuration fits and, for a model of volumes, the
// largest volume that fits the budget (train::largest_volume, with `fixed` and `repeats` as
// `p` was planned).
void require_a_fit(const train::Planning& p, const train::Config& c, train::Job& job,
                   const std::set<std::string>& fixed, int repeats);

}  // namespace tandem::cli
