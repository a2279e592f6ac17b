#include "tandem/memory/tracker.h"

#include <utility>

#include "tandem/common/check.h"
#include "tandem/memory/out_of_memory.h"

namespace tandem::memory {
namespace {

// Relaxed order suffices: each counter is read-modify-written atomically, and no other memory
// is published through these counters.
constexpr auto kRelaxed = std::memory_order_relaxed;

void check_device(int device) {
  TANDEM_CHECK(device >= Tracker::kHost && device < Tracker::kMaxDevices,
               "device index {} is out of range: memory accounting covers devices 0..{} and "
               "{} for the host.",
               device, Tracker::kMaxDevices - 1, Tracker::kHost);
}

}  // namespace

Tracker& Tracker::global() {
  // Never destroyed: tensors freed during static destruction still release into it.
  static Tracker* tracker = new Tracker();
  return *tracker;
}

Tracker::Counters& Tracker::at(int device) {
  check_device(device);
  return counters_[static_cast<size_t>(device + 1)];
}

const Tracker::Counters& Tracker::at(int device) const {
  check_device(device);
  return counters_[static_cast<size_t>(device + 1)];
}

void Tracker::register_device(int device, std::string name) {
  check_device(device);
  std::lock_guard<std::mutex> lock(names_mutex_);
  names_[static_cast<size_t>(device + 1)] = std::move(name);
}

std::string Tracker::name(int device) const {
  check_device(device);
  {
    std::lock_guard<std::mutex> lock(names_mutex_);
    const std::string& name = names_[static_cast<size_t>(device + 1)];
    if (!name.empty()) return name;
  }
  return device == kHost ? std::string("host") : fmt::format("device {}", device);
}

uint64_t Tracker::current(int device) const { return at(device).current.load(kRelaxed); }

uint64_t Tracker::peak(int device) const { return at(device).peak.load(kRelaxed); }

void Tracker::reset_peak(int device) {
  Counters& c = at(device);
  c.peak.store(c.current.load(kRelaxed), kRelaxed);
}

void Tracker::set_budget(int device, uint64_t bytes) { at(device).budget.store(bytes, kRelaxed); }

uint64_t Tracker::budget(int device) const { return at(device).budget.load(kRelaxed); }

void Tracker::charge(int device, uint64_t bytes) {
  Counters& c = at(device);
  uint64_t in_use = c.current.load(kRelaxed);
  uint64_t now = 0;
  do {
    const uint64_t budget = c.budget.load(kRelaxed);
    if (__builtin_add_overflow(in_use, bytes, &now) || (budget != 0 && now > budget)) {
      throw_out_of_memory(device, bytes, in_use);
    }
  } while (!c.current.compare_exchange_weak(in_use, now, kRelaxed));

  uint64_t peak = c.peak.load(kRelaxed);
  while (now > peak && !c.peak.compare_exchange_weak(peak, now, kRelaxed)) {
  }
}

void Tracker::release(int device, uint64_t bytes) noexcept {
  TANDEM_ASSERT(device >= kHost && device < kMaxDevices, "release from device {}", device);
  const uint64_t before =
      counters_[static_cast<size_t>(device + 1)].current.fetch_sub(bytes, kRelaxed);
  TANDEM_ASSERT(before >= bytes, "{} releases {} bytes but only {} were charged", name(device),
                bytes, before);
}

void Tracker::throw_out_of_memory(int device, uint64_t bytes, uint64_t in_use) const {
  const Where& where = current_where();
  // The thread's own device name is the freshest; fall back to the registered one.
  std::string device_name =
      where.device == device && !where.device_name.empty() ? where.device_name : name(device);
  const Counters& c = at(device);
  throw OutOfMemory(std::move(device_name), where, bytes, in_use, c.peak.load(kRelaxed),
                    c.budget.load(kRelaxed));
}

}  // namespace tandem::memory
