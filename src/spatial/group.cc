#include "tandem/spatial/group.h"

#include "tandem/common/check.h"
#include "tandem/common/device.h"

namespace tandem::spatial {

int64_t workspace_bound(uint64_t device_memory) { return static_cast<int64_t>(device_memory / 64); }

Group::Group(transport::Transport* transport, std::vector<int> devices, int index,
             c10::Device device, SlabLayout layout)
    : transport_(transport),
      devices_(std::move(devices)),
      index_(index),
      device_(device),
      layout_(std::move(layout)) {
  TANDEM_ASSERT(index_ >= 0 && index_ < size(), "slab {} of a group of {}", index_, size());
  TANDEM_ASSERT(layout_.size() == size(), "a group of {} devices with {} slabs", size(),
                layout_.size());
}

void Group::begin_run(int64_t step, int64_t run, Clock::time_point origin) {
  step_ = step;
  run_ = run;
  origin_ = origin;
  std::lock_guard<std::mutex> lock(mu_);
  exchanges_.clear();
}

transport::MessageKey Group::key(const std::string& name, int stage, int microbatch,
                                 bool gradient) const {
  return transport::MessageKey{name, static_cast<int>(step_), microbatch, gradient, stage, stage,
                               run_};
}

void Group::send(int to, const transport::MessageKey& key, const torch::Tensor& tensor) {
  if (dry()) return;
  TANDEM_ASSERT(to >= 0 && to < size() && to != index_, "slab {} sends to slab {} of {}", index_,
                to, size());
  transport_->send(devices_[index_], devices_[to], key, tensor,
                   record_on_current_stream(tensor.device()));
}

torch::Tensor Group::recv(int from, const transport::MessageKey& key) {
  TANDEM_ASSERT(!dry(), "a dry group has no slab {} to receive from", from);
  TANDEM_ASSERT(from >= 0 && from < size() && from != index_, "slab {} receives from slab {} of {}",
                index_, from, size());
  return transport_->recv(devices_[index_], devices_[from], key, device_);
}

double Group::now_us() const {
  return std::chrono::duration<double, std::micro>(Clock::now() - origin_).count();
}

void Group::record(Exchange exchange) {
  std::lock_guard<std::mutex> lock(mu_);
  exchanges_.push_back(std::move(exchange));
}

std::vector<Exchange> Group::exchanges() const {
  std::lock_guard<std::mutex> lock(mu_);
  return exchanges_;
}

}  // namespace tandem::spatial
