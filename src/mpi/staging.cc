#include "tandem/mpi/staging.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/cuda.h>

namespace tandem::mpi {

bool pinned_memory_available() {
  static const bool available = torch::cuda::is_available();
  return available;
}

torch::Tensor host_payload(const torch::Tensor& tensor, const transport::ReadyEvent& ready) {
  torch::NoGradGuard no_grad;
  torch::Tensor t = tensor.detach();
  if (t.device().is_cpu()) return t.contiguous();
  if (ready) {
    // Make the stream the copy runs on wait for the producing kernels (c10::Event has no
    // host-side synchronize in LibTorch 1.13; block() exists in 1.13 and 2.x).
    c10::impl::VirtualGuardImpl impl(t.device().type());
    ready->block(impl.getStream(t.device()));
  }
  auto options =
      t.options().device(c10::kCPU).pinned_memory(t.is_cuda() && pinned_memory_available());
  torch::Tensor host = torch::empty(t.sizes(), options);
  host.copy_(t, /*non_blocking=*/false);
  return host;
}

torch::Tensor host_to_device(torch::Tensor host, c10::Device into) {
  if (into.is_cpu()) return host;
  return host.to(into, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace tandem::mpi
