// The subcommands of `tandem`. Each registers its options on the CLI11 app and returns the
// function that runs it once the command line has parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <functional>
#include <string>

namespace tandem::cli {

// Exit statuses, one rule for every command: 0 success; 2 the command line or an input file
// (data, checkpoint, state dict) is wrong, or an output cannot be written where it is asked
// for, found before any work; 1 a failure while working (a step, a file that cannot be
// written after all); 3 out of memory: a device over its budget, or data that cannot fit.
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitOutOfMemory = 3;

// The message of an error from LibTorch (c10::Error, without the C++ backtrace its what()
// carries) or from the standard library.
std::string error_message(const std::exception& e);

using Runner = std::function<int()>;

Runner add_train(CLI::App& app);
Runner add_schedule(CLI::App& app);
Runner add_consolidate(CLI::App& app);
Runner add_eval(CLI::App& app);
Runner add_export(CLI::App& app);
Runner add_numerics(CLI::App& app);

}  // namespace tandem::cli
