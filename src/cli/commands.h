// The subcommands of `tandem`. Each registers its options on the CLI11 app and returns the
// function that runs it once the command line has parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <functional>
#include <string>

#include "tandem/train/failure.h"

namespace tandem::cli {

// Exit statuses, one rule for every command (tandem/train/failure.h).
using train::kExitFailure;
using train::kExitOutOfMemory;
using train::kExitUsage;

// The status of the exception being handled (call inside a catch block), printed as
// "tandem: <message>" with the library's option names as this command's flags.
int report_failure(train::When when);

using Runner = std::function<int()>;

Runner add_train(CLI::App& app);
Runner add_schedule(CLI::App& app);
Runner add_consolidate(CLI::App& app);
Runner add_eval(CLI::App& app);
Runner add_export(CLI::App& app);
Runner add_numerics(CLI::App& app);
Runner add_predict(CLI::App& app);
Runner add_verify(CLI::App& app);
Runner add_plan(CLI::App& app);

}  // namespace tandem::cli
