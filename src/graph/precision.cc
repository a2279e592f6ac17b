#include "tandem/graph/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <map>
#include <mutex>
#include <utility>

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"

namespace tandem::graph {

namespace {

// LibTorch 2 names the autocast state per device type; 1.13 has a function per device type.
bool autocast_enabled(c10::DeviceType d) {
#if TORCH_VERSION_MAJOR >= 2
  return at::autocast::is_autocast_enabled(d);
#else
  return d == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

void set_autocast_enabled(c10::DeviceType d, bool on) {
#if TORCH_VERSION_MAJOR >= 2
  at::autocast::set_autocast_enabled(d, on);
#else
  if (d == c10::DeviceType::CUDA)
    at::autocast::set_enabled(on);
  else
    at::autocast::set_cpu_enabled(on);
#endif
}

c10::ScalarType autocast_type(c10::DeviceType d) {
#if TORCH_VERSION_MAJOR >= 2
  return at::autocast::get_autocast_dtype(d);
#else
  return d == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                    : at::autocast::get_autocast_cpu_dtype();
#endif
}

void set_autocast_type(c10::DeviceType d, c10::ScalarType type) {
#if TORCH_VERSION_MAJOR >= 2
  at::autocast::set_autocast_dtype(d, type);
#else
  if (d == c10::DeviceType::CUDA)
    at::autocast::set_autocast_gpu_dtype(type);
  else
    at::autocast::set_autocast_cpu_dtype(type);
#endif
}

}  // namespace

ScopedAutocast::ScopedAutocast(c10::Device device, c10::ScalarType type) {
  if (type == c10::kFloat) return;
  TANDEM_CHECK(device.is_cpu() || device.is_cuda(), "a reduced precision on device {}",
               device.str());
  active_ = true;
  device_type_ = device.type();
  was_enabled_ = autocast_enabled(device_type_);
  was_type_ = autocast_type(device_type_);
  was_caching_ = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  set_autocast_type(device_type_, type);
  set_autocast_enabled(device_type_, true);
}

ScopedAutocast::~ScopedAutocast() {
  if (!active_) return;
  set_autocast_enabled(device_type_, was_enabled_);
  set_autocast_type(device_type_, was_type_);
  at::autocast::set_autocast_cache_enabled(was_caching_);
}

std::vector<torch::Tensor> forward_in_precision(const Layer& layer,
                                                const std::vector<torch::Tensor>& inputs) {
  c10::Device device = c10::kCPU;
  for (const torch::Tensor& t : inputs)
    if (t.defined()) {
      device = t.device();
      break;
    }
  ScopedAutocast autocast(device, current_call().precision);
  return layer.forward(inputs);
}

c10::ScalarType autocast_type_here(c10::Device device) {
  return autocast_enabled(device.type()) ? autocast_type(device.type()) : c10::kFloat;
}

torch::Tensor in_autocast_type(const torch::Tensor& t) {
  if (!t.defined() || !t.is_floating_point() || !autocast_enabled(t.device().type())) return t;
  return reduced_to(t, autocast_type(t.device().type()));
}

torch::Tensor reduced_to(const torch::Tensor& t, c10::ScalarType type) {
  if (!t.defined() || !t.is_floating_point() || t.scalar_type() == type) return t;
  return t.to(type);
}

std::string reduced_precision_refusal(c10::Device device, c10::ScalarType type) {
  if (type == c10::kFloat) return "";
  static std::mutex mu;
  static std::map<std::pair<int, int>, std::string> tried;
  const std::pair<int, int> key{static_cast<int>(device.type()), static_cast<int>(type)};
  std::lock_guard<std::mutex> lock(mu);
  if (const auto it = tried.find(key); it != tried.end()) return it->second;
  std::string why;
  try {
    const auto options = torch::TensorOptions().device(device).dtype(type);
    // Shapes large enough for the library kernels (small products take other paths).
    torch::Tensor x = torch::ones({2, 8, 8, 8, 8}, options).requires_grad_(true);
    torch::Tensor w = torch::ones({8, 8, 3, 3, 3}, options).requires_grad_(true);
    torch::Tensor a = torch::ones({64, 64}, options).requires_grad_(true);
    torch::Tensor l = torch::ones({64, 64}, options).requires_grad_(true);
    torch::Tensor b = torch::ones({64}, options).requires_grad_(true);
    (torch::conv3d(x, w, {}, 1, 1).sum() + torch::linear(a, l, b).sum() + a.mm(l).sum()).backward();
  } catch (const c10::Error& e) {
    why = e.what_without_backtrace();
  } catch (const std::exception& e) {  // oneDNN's own errors (dnnl::error) are not c10's
    why = e.what();
  }
  why = why.substr(0, why.find('\n'));
  tried[key] = why;
  return why;
}

}  // namespace tandem::graph
