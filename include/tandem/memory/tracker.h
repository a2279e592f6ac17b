// Per-device byte accounting: bytes in use now, the high-water mark, and an optional budget.
//
// Devices are tandem's device indices 0..kMaxDevices-1, plus kHost (-1) for bytes allocated
// while a thread has no device (loading data, building the model, the main thread).
//
// Thread-safety: every method may be called from any thread at any time. charge() and
// release() are lock-free (atomics on one cache line per device) because the allocator hook
// calls them on every tensor allocation; only names sit behind a mutex, read on error paths.
// Exactness: charge() reserves with a compare-and-swap, so concurrent charges never take a
// device past its budget and current() is always the exact sum of outstanding charges.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "tandem/memory/context.h"

namespace tandem::memory {

class Tracker {
 public:
  static constexpr int kHost = -1;
  static constexpr int kMaxDevices = 256;

  // The process-wide tracker the CPU allocator hook charges. Lives until the process ends.
  static Tracker& global();

  Tracker() = default;
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  // Names `device` in messages ("cpu:1"). Unregistered devices read "device N"; kHost "host".
  void register_device(int device, std::string name);
  std::string name(int device) const;

  uint64_t current(int device) const;
  uint64_t peak(int device) const;
  // Starts a new high-water mark from the bytes in use now.
  void reset_peak(int device);
  // 0 = no budget. A budget below current() is allowed; the next charge then fails.
  void set_budget(int device, uint64_t bytes);
  uint64_t budget(int device) const;

  // Adds `bytes` to `device`, or throws OutOfMemory (naming current_where()) and changes
  // nothing when that would exceed its budget. Throws tandem::Error for a device out of range.
  void charge(int device, uint64_t bytes);
  // Gives back bytes charged earlier to the same device; any thread may call it.
  void release(int device, uint64_t bytes) noexcept;

 private:
  struct alignas(64) Counters {
    std::atomic<uint64_t> current{0};
    std::atomic<uint64_t> peak{0};
    std::atomic<uint64_t> budget{0};
  };

  Counters& at(int device);
  const Counters& at(int device) const;
  [[noreturn]] void throw_out_of_memory(int device, uint64_t bytes, uint64_t in_use) const;

  std::array<Counters, kMaxDevices + 1> counters_;  // [0] is kHost, [d + 1] is device d
  mutable std::mutex names_mutex_;
  std::array<std::string, kMaxDevices + 1> names_;  // guarded by names_mutex_
};

}  // namespace tandem::memory
