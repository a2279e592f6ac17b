// The type a layer's forward computes in (--precision): fp32, or bf16 / fp16 under LibTorch's
// autocast on the layer's device, weights staying fp32.
//
// Under autocast, LibTorch casts the inputs of its convolutions and products to the reduced type
// (and computes what needs range, a loss, in fp32); its casts are autograd's own, so the weights'
// gradients arrive in fp32. Autocast is on only for the forward (and its recomputation): a
// backward runs in the types the forward saved. tandem's own autograd functions (a split
// convolution, a halo convolution, a split product) see autocast inside their forward, and their
// backward computes in the type of the gradient it receives (reduced_to).
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "tandem/graph/layer.h"

namespace tandem::graph {

// While alive, the calling thread's forwards on `device` compute their convolutions and products
// in `type` (kFloat: no autocast; the guard then changes nothing). Restores the thread's state.
// Autocast's cache of cast weights is off: a cast is made per use, so a weight the optimizer
// changed is never read through a stale copy.
class ScopedAutocast {
 public:
  ScopedAutocast(c10::Device device, c10::ScalarType type);
  ~ScopedAutocast();
  ScopedAutocast(const ScopedAutocast&) = delete;
  ScopedAutocast& operator=(const ScopedAutocast&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_type_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  c10::ScalarType was_type_ = c10::kFloat;
  bool was_caching_ = true;
};

// `layer`'s forward of `inputs` under autocast to the current call's precision
// (CallContext::precision) on the inputs' device: how every forward of a run and of its memory
// plan's measurements is made.
std::vector<torch::Tensor> forward_in_precision(const Layer& layer,
                                                const std::vector<torch::Tensor>& inputs);

// The type autocast computes convolutions and products in on `device`'s type of device in the
// calling thread: its reduced type while on, kFloat while off.
c10::ScalarType autocast_type_here(c10::Device device);

// `t` in the type autocast computes in on its device where autocast is on there (a
// differentiable cast), else `t`: for operations autocast does not list that compute as a
// convolution does (aten::convolution, which ONNX graphs' convolutions call).
torch::Tensor in_autocast_type(const torch::Tensor& t);

// `t` in `type` when it is floating point of another type (a saved fp32 weight or model input
// met by a reduced-precision gradient), else `t`.
torch::Tensor reduced_to(const torch::Tensor& t, c10::ScalarType type);

// Why `device`'s kernels cannot compute a forward and backward in `type` ("" when they can): a
// small convolution and product tried once per device type and type. On CPU devices bf16 needs
// oneDNN's bf16 kernels (AVX-512 or AMX; oneDNN capped at AVX2, as --cpu-kernels portable caps
// it, has none).
std::string reduced_precision_refusal(c10::Device device, c10::ScalarType type);

}  // namespace tandem::graph
