#include "mpi/staging.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/cuda.h>

#include "tandem/memory/context.h"
#include "tandem/memory/tracker.h"

namespace tandem::mpi {

namespace {

// Makes the current stream of `t`'s device wait for the producing kernels: later work queued on
// that stream (a copy) sees finished values. c10::Event has no host-side synchronize in
// LibTorch 1.13; block() exists in 1.13 and 2.x.
c10::Stream wait_on_current_stream(const torch::Tensor& t, const transport::ReadyEvent& ready) {
  c10::impl::VirtualGuardImpl impl(t.device().type());
  c10::Stream stream = impl.getStream(t.device());
  if (ready) ready->block(stream);
  return stream;
}

}  // namespace

bool pinned_memory_available() {
  static const bool available = torch::cuda::is_available();
  return available;
}

torch::Tensor host_payload(const torch::Tensor& tensor, const transport::ReadyEvent& ready) {
  torch::NoGradGuard no_grad;
  torch::Tensor t = tensor.detach();
  if (t.device().is_cpu()) return t.contiguous();
  wait_on_current_stream(t, ready);
  auto options =
      t.options().device(c10::kCPU).pinned_memory(t.is_cuda() && pinned_memory_available());
  torch::Tensor host = torch::empty(t.sizes(), options);
  host.copy_(t, /*non_blocking=*/false);
  return host;
}

torch::Tensor device_payload(const torch::Tensor& tensor, const transport::ReadyEvent& ready) {
  torch::NoGradGuard no_grad;
  torch::Tensor t = tensor.detach();
  if (t.device().is_cpu()) return t.contiguous();
  const c10::Stream stream = wait_on_current_stream(t, ready);
  torch::Tensor payload = t.contiguous();
  stream.synchronize();
  return payload;
}

torch::Tensor received_on(torch::Tensor payload, c10::Device into) {
  if (payload.device() != into) return payload.to(into, /*non_blocking=*/false, /*copy=*/true);
  if (!into.is_cpu()) {
    c10::impl::VirtualGuardImpl impl(into.type());
    payload.record_stream(impl.getStream(into));
  }
  return payload;
}

torch::Tensor charged_to_caller(torch::Tensor payload) {
  const int device = memory::current_where().device;
  if (device < 0 || !payload.is_cpu()) return payload;
  const uint64_t bytes = payload.nbytes();
  memory::Tracker::global().charge(device, bytes);
  // A view of the same bytes whose deleter gives the charge back and lets the payload go.
  auto* keep = new torch::Tensor(payload);
  return torch::from_blob(
      payload.data_ptr(), payload.sizes(), payload.strides(),
      [keep, device, bytes](void*) {
        memory::Tracker::global().release(device, bytes);
        delete keep;
      },
      payload.options());
}

}  // namespace tandem::mpi
