#include "tandem/common/device.h"

#include <ATen/Parallel.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <sched.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <thread>

#include "loaded_symbol.h"
#include "tandem/common/check.h"

namespace tandem {

namespace {
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}
}  // namespace

bool keep_freed_memory() {
#ifdef __GLIBC__
  // 32 MiB: glibc's most for the threshold on 64-bit systems (HEAP_MAX_SIZE / 2); -1 turns
  // trimming off (mallopt(3)). A heap that grows takes 256 MiB more address space at once
  // (pages the system maps only when written), where each small growth would be a call that
  // holds every thread's page faults back.
  const bool mapped = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trimmed = mallopt(M_TRIM_THRESHOLD, -1) == 1;
  const bool padded = mallopt(M_TOP_PAD, 256 << 20) == 1;
  return mapped && trimmed && padded;
#else
  return false;
#endif
}

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::vector<DeviceSpec> parse_devices(const std::string& spec, int threads_per_device) {
  TANDEM_CHECK(!spec.empty(), "Config::devices is empty; give a count (4) or a list (cpu:0,cpu:1)");
  std::vector<DeviceSpec> out;
  bool all_digits = spec.find_first_not_of("0123456789") == std::string::npos;
  if (all_digits) {
    // More digits than any allowed count has would overflow the conversion.
    const bool short_enough = spec.size() <= 4;
    const int n = short_enough ? std::stoi(spec) : 0;
    TANDEM_CHECK(short_enough && n >= 1 && n <= 1024,
                 "Config::devices = {} must be a count between 1 and 1024 (or a list: cpu:0,cpu:1)",
                 spec);
    for (int i = 0; i < n; ++i)
      out.push_back({fmt::format("cpu:{}", i), c10::Device(c10::kCPU), 1});
  } else {
    for (const auto& item : split(spec, ',')) {
      auto colon = item.find(':');
      std::string type = item.substr(0, colon);
      TANDEM_CHECK(colon != std::string::npos && colon + 1 < item.size() &&
                       item.find_first_not_of("0123456789", colon + 1) == std::string::npos,
                   "device '{}' in Config::devices = {} is not of the form cpu:N or cuda:N", item,
                   spec);
      TANDEM_CHECK(
          item.size() - colon - 1 <= 6,
          "device '{}' in Config::devices = {} has an index beyond any device; number devices "
          "from 0 (cpu:0,cpu:1)",
          item, spec);
      const int index = std::stoi(item.substr(colon + 1));
      if (type == "cpu") {
        out.push_back({item, c10::Device(c10::kCPU), 1});
      } else if (type == "cuda") {
        TANDEM_CHECK(torch::cuda::is_available(),
                     "device '{}' needs CUDA, but this LibTorch has no CUDA or no GPU is visible; "
                     "use cpu devices (Config::devices = 4)",
                     item);
        TANDEM_CHECK(index < static_cast<int>(torch::cuda::device_count()),
                     "device '{}' does not exist: {} GPU(s) visible", item,
                     torch::cuda::device_count());
        out.push_back({item, c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index)), 1});
      } else {
        TANDEM_CHECK(false,
                     "device type '{}' in Config::devices = {} is unknown; use cpu:N or cuda:N",
                     type, spec);
      }
    }
  }
  // A GPU may be named more than once (its devices share it); a CPU device is a worker of its
  // own with its own memory count, and the name is how results and reports tell them apart.
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = i + 1; j < out.size(); ++j)
      TANDEM_CHECK(
          !(out[i].device.is_cpu() && out[i].name == out[j].name),
          "device '{}' appears twice in Config::devices = {}; CPU devices need distinct names "
          "(cpu:0,cpu:1), or give a count (Config::devices = {})",
          out[i].name, spec, out.size());
  int cpu_devices = 0;
  for (const auto& d : out) cpu_devices += d.device.is_cpu();
  int threads = threads_per_device > 0 ? threads_per_device
                                       : std::max(1, available_cores() / std::max(1, cpu_devices));
  for (auto& d : out) d.threads = threads;
  return out;
}

DeviceContext::DeviceContext(DeviceSpec spec) : spec_(std::move(spec)) {
  if (!spec_.device.is_cpu()) {
    c10::impl::VirtualGuardImpl impl(spec_.device.type());
    stream_ = impl.getStreamFromGlobalPool(spec_.device, /*isHighPriority=*/false);
  }
}

void DeviceContext::enter_worker_thread() {
  at::set_num_threads(spec_.threads);
  if (stream_) {
    c10::impl::VirtualGuardImpl impl(spec_.device.type());
    impl.exchangeDevice(spec_.device);
    impl.exchangeStream(*stream_);  // the thread's current stream for this device, from now on
  }
}

std::shared_ptr<c10::Event> DeviceContext::record_ready() const {
  if (!stream_) return nullptr;
  auto ev = std::make_shared<c10::Event>(spec_.device.type());
  ev->record(*stream_);
  return ev;
}

torch::Tensor DeviceContext::copy_in(const torch::Tensor& src,
                                     const std::shared_ptr<c10::Event>& ready) const {
  if (!stream_) {
    // CPU: the producer finished before it sent; a plain copy owns fresh storage.
    return src.device().is_cpu() ? src.clone(at::MemoryFormat::Contiguous)
                                 : src.to(spec_.device, /*non_blocking=*/false, /*copy=*/true);
  }
  if (ready) ready->block(*stream_);
  torch::Tensor out = src.to(spec_.device, /*non_blocking=*/true, /*copy=*/true);
  if (!src.device().is_cpu()) {
    c10::impl::VirtualGuardImpl impl(src.device().type());
    impl.recordDataPtrOnStream(src.storage().data_ptr(), *stream_);
  }
  return out;
}

std::shared_ptr<c10::Event> record_on_current_stream(const c10::Device& device) {
  if (device.is_cpu()) return nullptr;
  c10::impl::VirtualGuardImpl impl(device.type());
  auto ev = std::make_shared<c10::Event>(device.type());
  ev->record(impl.getStream(device));
  return ev;
}

void wait_on_current_stream(const c10::Device& device, const std::shared_ptr<c10::Event>& ready) {
  if (device.is_cpu() || !ready) return;
  c10::impl::VirtualGuardImpl impl(device.type());
  ready->block(impl.getStream(device));
}

void DeviceContext::synchronize() const {
  if (stream_) stream_->synchronize();
}

bool set_blas_threads(int n) {
  const auto fn = detail::loaded_symbol<void (*)(int)>("openblas_set_num_threads");
  if (!fn) return false;
  fn(n);
  return true;
}

}  // namespace tandem
