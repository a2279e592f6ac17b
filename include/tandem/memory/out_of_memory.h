// The error a device's budget raises, thrown before the allocation that would break it.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/common/check.h"
#include "tandem/memory/context.h"

namespace tandem::memory {

// what() reads, for example:
//   cpu:1 is out of its 64.0 MiB budget: stage 1, layer conv3 (forward, micro-batch 2) asked
//   for 8.0 MiB while 60.2 MiB are in use (peak 60.2 MiB). Ways out: more devices, --recompute
//   stage, more micro-batches, a smaller volume or batch, or a larger --device-memory.
// In the "parameters" and "optimizer" phases only fewer layers per device or a larger budget
// help, and the ways out say so.
// The fields stay available for programs (the runtime's step report, tests).
class OutOfMemory : public Error {
 public:
  OutOfMemory(std::string device_name, Where where, uint64_t requested, uint64_t in_use,
              uint64_t peak, uint64_t budget);

  const std::string& device_name() const { return device_name_; }
  const Where& where() const { return where_; }
  uint64_t requested() const { return requested_; }
  uint64_t in_use() const { return in_use_; }
  uint64_t peak() const { return peak_; }
  uint64_t budget() const { return budget_; }

 private:
  std::string device_name_;
  Where where_;
  uint64_t requested_;
  uint64_t in_use_;
  uint64_t peak_;
  uint64_t budget_;
};

// What a run must hold at once does not fit the memory it would go to, found from sizes before
// anything is allocated (e.g. one micro-batch of volumes larger than the machine's memory).
// Programs and the command line treat it as OutOfMemory (exit status 3).
class DoesNotFit : public Error {
 public:
  using Error::Error;
};

}  // namespace tandem::memory
