#include "tandem/memory/out_of_memory.h"

#include <utility>

#include "tandem/memory/bytes.h"

namespace tandem::memory {
namespace {

// What lowers the bytes of `where`: a stage's parameters and optimizer state shrink only with
// fewer layers on the device; activations also with slabs of each sample, recomputation and
// smaller micro-batches.
const char* ways_out(const Where& where) {
  if (where.phase == "parameters" || where.phase == "optimizer")
    return "more devices or another Config::balance (fewer parameters on this device), or a "
           "larger Config::device_memory.";
  return "more devices (for a volume also Config::spatial = N: every sample cut into N depth "
         "slabs, one per device, each holding about 1/N of every activation), Config::recompute, "
         "more micro-batches, a smaller volume or batch, or a larger Config::device_memory.";
}

std::string message(const std::string& device_name, const Where& where, uint64_t requested,
                    uint64_t in_use, uint64_t peak, uint64_t budget) {
  std::string who = describe(where);
  if (who.empty()) who = "an allocation outside any stage";
  return fmt::format(
      "{} is out of its {} budget: {} asked for {} while {} are in use (peak {}). "
      "Ways out: {}",
      device_name, format_bytes(budget), who, format_bytes(requested), format_bytes(in_use),
      format_bytes(peak), ways_out(where));
}

}  // namespace

OutOfMemory::OutOfMemory(std::string device_name, Where where, uint64_t requested, uint64_t in_use,
                         uint64_t peak, uint64_t budget)
    : Error(message(device_name, where, requested, in_use, peak, budget)),
      device_name_(std::move(device_name)),
      where_(std::move(where)),
      requested_(requested),
      in_use_(in_use),
      peak_(peak),
      budget_(budget) {}

}  // namespace tandem::memory
