// What an exception means for a command's exit: one mapping for every tandem command and for
// Job::guard. Statuses: 0 success; 2 the options or an input file (data, checkpoint, state dict)
// are wrong, or an output cannot be written where it is asked for, found before any work; 1 a
// failure while working (a step, a file that cannot be written after all); 3 out of memory: a
// device over its budget, or data that cannot fit.
#pragma once

#include <exception>
#include <string>

namespace tandem::train {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitOutOfMemory = 3;

// Whether the work had begun when the exception came: before it, a tandem::Error is a wrong
// option or input (status 2); during it, a failure (status 1).
enum class When { kBeforeWork, kWhileWorking };

struct Failure {
  int status = kExitFailure;
  std::string message;  // without LibTorch's C++ backtrace
};

// The status and message of `error`: out of memory (memory::OutOfMemory, memory::DoesNotFit,
// a runtime::StepError out of memory) 3; other tandem::Error 2 before the work, 1 during it;
// anything else 1.
Failure failure_of(const std::exception_ptr& error, When when);

// The message of an error from LibTorch (c10::Error, without the C++ backtrace its what()
// carries) or from the standard library.
std::string error_message(const std::exception& e);

}  // namespace tandem::train
