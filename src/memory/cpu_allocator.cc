// Design: each allocation carries a 64-byte header in front of the data it returns,
//
//   base (from the previous allocator)           data (returned; DataPtr context == data)
//   | Header{inner context, inner deleter, device, bytes} ... | n bytes of tensor ...
//
// so the deleter (a plain function pointer handed only `data`) finds the device and size at
// data - 64 and releases exactly what was charged, from any thread, without a lock. The
// alternatives cost more: a side table keyed by pointer needs a lock (or a concurrent map)
// on every allocation and free, and a heap-allocated context struct adds a malloc per tensor.
// 64 bytes keep the data as aligned as the previous allocator made the base (c10's
// gAlignment is at most 64) and are negligible next to tensor sizes. Because context == data
// and the deleter is always counted_delete, raw_deleter() can return it, so LibTorch's
// raw_allocate()/raw_deallocate() keep working.
#include "memory/cpu_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "tandem/common/check.h"
#include "tandem/memory/context.h"
#include "tandem/memory/tracker.h"

namespace tandem::memory {
namespace {

struct Header {
  void* inner_context;
  c10::DeleterFnPtr inner_deleter;
  uint64_t bytes;
  int device;
};
static_assert(sizeof(Header) <= kCpuAllocationOverhead);
static_assert(kCpuAllocationOverhead % c10::gAlignment == 0);

// Above the default CPU allocator (priority 0) and mobile/caching variants, below 255 so a
// program that insists on its own allocator still can.
constexpr uint8_t kPriority = 200;

Header* header_of(void* data) {
  return reinterpret_cast<Header*>(static_cast<char*>(data) - kCpuAllocationOverhead);
}

void counted_delete(void* data) {
  if (data == nullptr) return;
  Header* h = header_of(data);
  Tracker::global().release(h->device, h->bytes);
  if (h->inner_deleter != nullptr) h->inner_deleter(h->inner_context);
}

// LibTorch changed the Allocator interface between 1.13 and 2.x: allocate() lost its const
// and copy_data() appeared as a pure virtual. Detect both instead of guessing the version.
template <typename A, typename = void>
struct HasCopyData : std::false_type {};
template <typename A>
struct HasCopyData<A, std::void_t<decltype(&A::copy_data)>> : std::true_type {};

constexpr bool kConstAllocate = std::is_same_v<decltype(&c10::Allocator::allocate),
                                               c10::DataPtr (c10::Allocator::*)(size_t) const>;

// Layers that give `Impl` the matching overrides; Impl provides counted_allocate().
template <typename Base, bool kConst>
struct AllocateShim;
template <typename Base>
struct AllocateShim<Base, true> : Base {
  c10::DataPtr allocate(size_t n) const override { return this->counted_allocate(n); }
  virtual c10::DataPtr counted_allocate(size_t n) const = 0;
};
template <typename Base>
struct AllocateShim<Base, false> : Base {
  c10::DataPtr allocate(size_t n) override { return this->counted_allocate(n); }
  virtual c10::DataPtr counted_allocate(size_t n) const = 0;
};

template <typename Base, bool kHas>
struct CopyDataShim : Base {};
template <typename Base>
struct CopyDataShim<Base, true> : Base {
  // CPU memory on both sides: what c10's default_copy_data does.
  void copy_data(void* dest, const void* src, size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

using AllocatorBase =
    AllocateShim<CopyDataShim<c10::Allocator, HasCopyData<c10::Allocator>::value>, kConstAllocate>;

class CountingAllocator final : public AllocatorBase {
 public:
  explicit CountingAllocator(c10::Allocator* previous) : previous_(previous) {}

  c10::DataPtr counted_allocate(size_t n) const override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return c10::DataPtr(nullptr, nullptr, &counted_delete, cpu);

    const int device = current_where().device;
    Tracker& tracker = Tracker::global();
    tracker.charge(device, n);  // throws OutOfMemory before anything is allocated
    c10::DataPtr inner;
    try {
      inner = previous_->allocate(n + kCpuAllocationOverhead);
    } catch (...) {
      tracker.release(device, n);
      throw;
    }
    TANDEM_ASSERT(inner.get() != nullptr, "the CPU allocator returned null for {} bytes", n);

    auto* h = static_cast<Header*>(inner.get());
    h->inner_deleter = inner.get_deleter();
    h->inner_context = inner.release_context();
    h->bytes = n;
    h->device = device;
    void* data = static_cast<char*>(static_cast<void*>(h)) + kCpuAllocationOverhead;
    return c10::DataPtr(data, data, &counted_delete, cpu);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &counted_delete; }

 private:
  c10::Allocator* previous_;
};

std::atomic<bool> g_installed{false};

}  // namespace

void install_cpu_accounting() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (g_installed.load()) return;

  c10::Allocator* previous = c10::GetCPUAllocator();
  // Lives for the whole process: LibTorch keeps the raw pointer, and memory it hands out
  // may be freed during static destruction.
  static CountingAllocator* counting = new CountingAllocator(previous);
  c10::SetCPUAllocator(counting, kPriority);
  TANDEM_CHECK(c10::GetCPUAllocator() == counting,
               "could not install tandem's CPU memory accounting: another CPU allocator with a "
               "priority above {} is installed. Remove it, or run without per-device CPU "
               "budgets.",
               kPriority);
  g_installed.store(true);
}

bool cpu_accounting_installed() { return g_installed.load(); }

}  // namespace tandem::memory
