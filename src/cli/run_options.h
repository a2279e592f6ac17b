// The options `tandem train`, `eval`, `verify` and `predict` share, made from the option table
// (train/options.h): the model and its data, where the stages run and how micro-batches flow
// through them, batch sizes and the seed, the optimizer, the run's own. Each group registers on
// a subcommand with the defaults of train::Config.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tandem/train/config.h"
#include "tandem/train/options.h"

namespace tandem::cli {

// What the shared options fill in.
struct RunArgs {
  train::Config config;
  std::string device_memory;             // --device-memory as given, e.g. "2GiB"
  std::string cpu_kernels = "portable";  // --cpu-kernels: portable (AVX2 family) | native
  // The planner chooses the layout (tandem plan, train --auto): under MPI the job starts on one
  // replica's ranks as stage devices whatever --stages says, which the chosen --spatial may
  // meet (Job::relayout).
  bool planned = false;
};

// Every option of `group` in the table, in its order, on `cmd`; the placement group adds
// --cpu-kernels (a setting of the process, not of the run) after --threads-per-device.
void add_option_group(CLI::App& cmd, RunArgs& args, train::OptionGroup group);

// The table's option of Config::`field` on `cmd`, where a command names or explains it in its
// own words: `flag` and `help` replace the table's when not empty.
CLI::Option* add_config_option(CLI::App& cmd, RunArgs& args, const std::string& field,
                               const std::string& flag = "", const std::string& help = "");

}  // namespace tandem::cli
