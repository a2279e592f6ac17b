// Moving tensors between their device and the host memory MPI reads and writes (an internal
// part of MpiTransport). Shape legend: any shape; the host tensor is contiguous.
#pragma once

#include <torch/types.h>

#include "tandem/transport/transport.h"

namespace tandem::mpi {

// True when this process can use CUDA, so that pinned host memory is available.
bool pinned_memory_available();

// The bytes MPI should send for `tensor`, as a contiguous CPU tensor with no autograd history.
// CPU: `tensor` itself when contiguous (same storage: the caller must not modify it while it
// travels), else a contiguous copy. Other devices: the current stream of the tensor's device
// first waits for `ready` (when not null), then the tensor is copied into pinned host memory;
// returns once the copy is done.
torch::Tensor host_payload(const torch::Tensor& tensor, const transport::ReadyEvent& ready);

// `host` on device `into`: itself when `into` is the CPU, else a synchronous copy.
torch::Tensor host_to_device(torch::Tensor host, c10::Device into);

}  // namespace tandem::mpi
