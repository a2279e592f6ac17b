// Per-device accounting of CPU tensor memory, by wrapping LibTorch's CPU allocator.
//
// Every CPU tensor allocation after install_cpu_accounting() is charged to
// Tracker::global() under current_where().device (kHost when the thread has no device), and
// released from that same device when the memory is freed, on whichever thread frees it.
// A charge that would exceed the device's budget throws OutOfMemory before any memory is
// taken; the exception reaches the caller of the LibTorch op (forward or CPU backward)
// unchanged.
//
// Not seen: memory allocated before installation (it keeps its original deleter and is never
// charged), memory that libraries take without LibTorch's allocator (BLAS and oneDNN
// scratch), and allocations on LibTorch's intra-op threads, which carry no Where and so land
// in the host bucket (ops allocate their outputs before going parallel, so this is rare).
#pragma once

#include <cstddef>

namespace tandem::memory {

// Installs the counting allocator in front of the current CPU allocator. Idempotent and
// thread-safe; call it at program start, before worker threads allocate (LibTorch's
// allocator registry itself is not synchronised). Throws tandem::Error if an allocator with
// higher priority is already installed and ours cannot take its place.
void install_cpu_accounting();

// Whether install_cpu_accounting() has succeeded in this process.
bool cpu_accounting_installed();

// Bytes each allocation takes beyond what was asked for (a header in front of the data that
// records the device and size to release). Not charged: budgets count tensor bytes.
constexpr size_t kCpuAllocationOverhead = 64;

}  // namespace tandem::memory
