// Moving tensors between their device and the memory MPI reads and writes (an internal part of
// MpiTransport). Shape legend: any shape; payloads are contiguous.
//
// Two paths for CUDA tensors. Staged (any MPI): the sender copies the tensor into pinned host
// memory and MPI moves host bytes; the receiver copies them to its device. Direct (an MPI that
// is CUDA-aware): MPI reads the sender's device memory and writes into a buffer on the
// receiver's GPU, with no host copy on either side.
#pragma once

#include <torch/types.h>

#include "tandem/transport/transport.h"

namespace tandem::mpi {

// True when this process can use CUDA, so that pinned host memory is available.
bool pinned_memory_available();

// The bytes MPI should send for `tensor` on the staged path, as a contiguous CPU tensor with no
// autograd history. CPU: `tensor` itself when contiguous (same storage: the caller must not
// modify it while it travels), else a contiguous copy. Other devices: the current stream of the
// tensor's device first waits for `ready` (when not null), then the tensor is copied into
// pinned host memory; returns once the copy is done.
torch::Tensor host_payload(const torch::Tensor& tensor, const transport::ReadyEvent& ready);

// The same on the direct path: a CUDA tensor stays on its GPU. The current stream waits for
// `ready`, makes the tensor contiguous, and is synchronized (that stream only, not the device),
// so MPI, which knows no streams, reads finished bytes. CPU tensors as host_payload.
torch::Tensor device_payload(const torch::Tensor& tensor, const transport::ReadyEvent& ready);

// A received payload on device `into`. Already there: itself; a CUDA buffer is then marked as
// used by the caller's current stream, so that the caching allocator does not hand its memory
// to the next receive while the caller's kernels still read it. Elsewhere: a synchronous copy.
torch::Tensor received_on(torch::Tensor payload, c10::Device into);

// `payload` (a CPU tensor the progress thread received: from the buffer pool, outside the
// allocator hook) charged to the calling thread's device (memory/context.h) for as long as
// it lives, like a copy that device made. May throw memory::OutOfMemory (the device's budget);
// the payload itself when the thread has no device.
torch::Tensor charged_to_caller(torch::Tensor payload);

}  // namespace tandem::mpi
