#include "memory/cuda_stats.h"

#include <torch/version.h>

#include "tandem/common/check.h"

#if TANDEM_HAVE_CUDA
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

namespace tandem::memory {

#if TANDEM_HAVE_CUDA
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

// StatType::AGGREGATE (all pools together) is index 0 in every LibTorch version; the enum
// itself moved between namespaces across versions, so it is not named here.
constexpr size_t kAggregate = 0;

c10::DeviceIndex checked_index(int index) {
  const int count = c10::cuda::device_count();
  TANDEM_CHECK(
      index >= 0 && index<count, "cuda:{} does not exist: this process sees {} CUDA device(s){}.",
                          index, count, count> 0
          ? fmt::format(", cuda:0..cuda:{}", count - 1)
          : std::string());
  // The caching allocator is set up lazily by LibTorch's CUDA initialisation; an empty
  // tensor triggers it without allocating anything.
  (void)at::empty({0}, at::TensorOptions().device(c10::Device(
                           c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index))));
  return static_cast<c10::DeviceIndex>(index);
}

}  // namespace

bool cuda_stats_available() { return c10::cuda::device_count() > 0; }

DeviceStats cuda_device_stats(int index) {
  const auto stats = alloc::getDeviceStats(checked_index(index));
  DeviceStats out;
  out.current = static_cast<uint64_t>(stats.allocated_bytes[kAggregate].current);
  out.peak = static_cast<uint64_t>(stats.allocated_bytes[kAggregate].peak);
  out.reserved = static_cast<uint64_t>(stats.reserved_bytes[kAggregate].current);
  return out;
}

void cuda_reset_peak(int index) { alloc::resetPeakStats(checked_index(index)); }

void cuda_set_memory_fraction(double fraction, int index) {
  TANDEM_CHECK(fraction > 0.0 && fraction <= 1.0,
               "a CUDA memory fraction must be in (0, 1], got {} for cuda:{}.", fraction, index);
  alloc::setMemoryFraction(fraction, checked_index(index));
}

uint64_t cuda_total_bytes(int index) {
  cudaDeviceProp prop;
  TANDEM_CHECK(cudaGetDeviceProperties(&prop, checked_index(index)) == cudaSuccess,
               "cannot read the properties of cuda:{}", index);
  return static_cast<uint64_t>(prop.totalGlobalMem);
}

#else  // no CUDA in this build

namespace {

[[noreturn]] void no_cuda(const char* what) {
  throw Error(
      fmt::format("{} needs CUDA, but tandem was built against LibTorch {} without CUDA. Use cpu:N "
                  "devices, or rebuild against a LibTorch with CUDA.",
                  what, TORCH_VERSION));
}

}  // namespace

bool cuda_stats_available() { return false; }
DeviceStats cuda_device_stats(int) { no_cuda("reading CUDA memory statistics"); }
void cuda_reset_peak(int) { no_cuda("resetting a CUDA memory peak"); }
void cuda_set_memory_fraction(double, int) { no_cuda("setting a CUDA memory fraction"); }
uint64_t cuda_total_bytes(int) { no_cuda("reading a GPU's memory size"); }

#endif

}  // namespace tandem::memory
