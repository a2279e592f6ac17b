// Devices: where a stage runs. `cpu:N` is a worker thread with its own thread budget and
// memory account; `cuda:N` is a worker thread with its own stream on GPU N. Several devices
// may name the same GPU (`cuda:0,cuda:0`): each still gets its own stream.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tandem {

struct DeviceSpec {
  std::string name;    // "cpu:1", "cuda:0"
  c10::Device device;  // kCPU for every cpu:N
  int threads = 1;     // intra-op threads of this device's worker
};

// Parses "4" (four cpu devices), "cpu:0,cpu:1" or "cuda:0,cuda:0,...". `threads_per_device`
// 0 means: the machine's cores divided among the cpu devices, at least 1 (a product's last
// bits depend on its thread count, so results then depend on the machine).
std::vector<DeviceSpec> parse_devices(const std::string& spec, int threads_per_device = 1);

// The execution context of one device's worker thread: its stream and the events that order
// transfers. All methods are called from that worker thread only.
class DeviceContext {
 public:
  explicit DeviceContext(DeviceSpec spec);
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const DeviceSpec& spec() const { return spec_; }
  bool is_cpu() const { return spec_.device.is_cpu(); }

  // Called once on the worker thread: sets its intra-op thread count and makes this device's
  // stream the thread's current stream.
  void enter_worker_thread();

  // An event recorded on this device's stream after everything enqueued so far; null on CPU.
  std::shared_ptr<c10::Event> record_ready() const;

  // A copy of `src` in this device's memory that shares no storage with `src`. Waits (on the
  // stream, not the host) for `ready` before reading `src`, and tells the allocator that `src`
  // is in use by this stream until the copy is done.
  torch::Tensor copy_in(const torch::Tensor& src, const std::shared_ptr<c10::Event>& ready) const;

  // Waits on the host for all work on this device's stream.
  void synchronize() const;

 private:
  DeviceSpec spec_;
  std::optional<c10::Stream> stream_;  // set for non-CPU devices
};

// An event recorded on the calling thread's current stream of GPU `device`, after everything
// queued there so far; null for a CPU device.
std::shared_ptr<c10::Event> record_on_current_stream(const c10::Device& device);
// Makes the calling thread's current stream of `device` wait, on the GPU and not the host,
// until `ready` has passed. Nothing for a CPU device or a null `ready`.
void wait_on_current_stream(const c10::Device& device, const std::shared_ptr<c10::Event>& ready);

// Limits BLAS (OpenBLAS) to `n` threads for the whole process; stage workers then scale with
// their own intra-op budgets instead of fighting over nested pools. Returns false when the
// loaded BLAS offers no such control.
bool set_blas_threads(int n);

// Number of cores this process may use.
int available_cores();

// Keeps the memory that freed tensors leave in the process for the next ones, where the C
// library would hand it back to the system: glibc maps every block above a threshold (128 KiB
// at first) on its own and unmaps it when freed, and returns the top of its heap, so each
// step's tensors come back as fresh pages that the system maps one fault at a time. Sets
// glibc's threshold to its largest (32 MiB) and turns off its trimming. Resident memory then
// stays at the process's high-water mark; tandem's own accounting of each device's bytes is
// unchanged. The tandem program calls it first thing; a program of its own that trains or
// plans with the library should too, or the planner's measured layer times (and the steps)
// carry those faults. Returns false where the C library is not glibc (nothing done).
bool keep_freed_memory();

}  // namespace tandem
