// Byte statistics of LibTorch's CUDA caching allocator, and its per-process budget.
//
// On CUDA devices tandem reads the caching allocator's own counters instead of wrapping the
// allocator: it already counts every tensor allocation per device, and its memory fraction
// is the budget. These functions compile everywhere; without CUDA, cuda_stats_available()
// is false and the others throw tandem::Error.
//
// TANDEM_HAVE_CUDA is 1 when this build can see LibTorch's CUDA headers and the CUDA
// runtime's. Define it to 0 (or 1) on the compiler command line to override the detection,
// e.g. for a CPU-only LibTorch on a machine whose CUDA toolkit is on the include path.
#pragma once

#include <cstdint>

#ifndef TANDEM_HAVE_CUDA
#if __has_include(<c10/cuda/CUDACachingAllocator.h>) && __has_include(<cuda_runtime_api.h>)
#define TANDEM_HAVE_CUDA 1
#else
#define TANDEM_HAVE_CUDA 0
#endif
#endif

namespace tandem::memory {

// Bytes held by tensors on one CUDA device (the caching allocator's "allocated", summed over
// its pools) and bytes it has reserved from the driver (allocated plus cached free blocks).
struct DeviceStats {
  uint64_t current = 0;
  uint64_t peak = 0;
  uint64_t reserved = 0;
};

// True when tandem was built with CUDA and at least one CUDA device is visible.
bool cuda_stats_available();

// Statistics of CUDA device `index` (0-based, as in cuda:N). Initialises CUDA if needed.
DeviceStats cuda_device_stats(int index);

// Starts a new peak from the bytes in use now on CUDA device `index`.
void cuda_reset_peak(int index);

// Caps what the caching allocator may take on CUDA device `index` at `fraction` of the
// device's memory, 0 < fraction <= 1; beyond it allocations fail with LibTorch's CUDA
// out-of-memory error.
void cuda_set_memory_fraction(double fraction, int index);

// Total memory of CUDA device `index`, in bytes.
uint64_t cuda_total_bytes(int index);

}  // namespace tandem::memory
