#include "tandem/transport/inprocess.h"

#include "tandem/memory/context.h"
#include "tandem/memory/out_of_memory.h"

namespace tandem::transport {

std::string MessageKey::to_string() const {
  return fmt::format("'{}' s{}->s{} step {} mb {} {} (run {})", tensor, from_stage, to_stage, step,
                     microbatch, gradient ? "grad" : "fwd", run);
}

InProcessTransport::InProcessTransport(std::vector<const DeviceContext*> devices,
                                       std::chrono::milliseconds timeout)
    : devices_(std::move(devices)), timeout_(timeout), mailboxes_(devices_.size()) {}

std::vector<int> InProcessTransport::local_devices() const {
  std::vector<int> all(devices_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return all;
}

void InProcessTransport::send(int from_device, int to_device, const MessageKey& key,
                              const torch::Tensor& tensor, ReadyEvent ready) {
  TANDEM_ASSERT(to_device >= 0 && to_device < num_devices(), "send to device {}", to_device);
  const Id id{from_device, key};
  bool awaited = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) throw Aborted(abort_reason_);
    awaited = mailboxes_[to_device].awaited.count(id) > 0;
  }
  // A waiting CPU receiver: copy into its memory here (its recv waits until the message is in
  // its mailbox). CUDA copies stay on the receiver's thread and stream.
  Message msg{tensor, ready};
  const DeviceContext* into = devices_[to_device];
  if (awaited && into && into->is_cpu() && tensor.device().is_cpu()) {
    memory::ScopedWhere where(to_device, into->spec().name);
    try {
      msg = Message{into->copy_in(tensor, ready), nullptr, true};
    } catch (const memory::OutOfMemory&) {
      // Over the receiver's budget: its recv copies and reports that in its own words.
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) throw Aborted(abort_reason_);
    auto [it, inserted] = mailboxes_[to_device].messages.emplace(id, std::move(msg));
    TANDEM_ASSERT(inserted, "message {} sent twice to device {}", key.to_string(), to_device);
  }
  cv_.notify_all();
}

torch::Tensor InProcessTransport::recv(int to_device, int from_device, const MessageKey& key,
                                       c10::Device into) {
  Message msg;
  {
    std::unique_lock<std::mutex> lock(mu_);
    Mailbox& box = mailboxes_[to_device];
    const Id id{from_device, key};
    box.awaited.insert(id);
    bool arrived = cv_.wait_for(lock, timeout_, [&] { return aborted_ || box.messages.count(id); });
    box.awaited.erase(id);
    if (aborted_) throw Aborted(abort_reason_);
    if (!arrived) {
      throw CommTimeout(fmt::format(
          "device {} waited {:.1f} s for {} from device {}; the sender never sent it (raise "
          "PipelineOptions::comm_timeout if a step legitimately takes this long)",
          to_device, timeout_.count() / 1000.0, key.to_string(), from_device));
    }
    auto it = box.messages.find(id);
    msg = std::move(it->second);
    box.messages.erase(it);
  }
  TANDEM_ASSERT(into == devices_[to_device]->spec().device, "recv into {} on device {}", into.str(),
                to_device);
  if (msg.copied) return msg.tensor;
  return devices_[to_device]->copy_in(msg.tensor, msg.ready);
}

void InProcessTransport::all_reduce_sum(int, std::vector<torch::Tensor>&) {}

void InProcessTransport::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    aborted_ = true;
    abort_reason_ = reason;
  }
  cv_.notify_all();
}

bool InProcessTransport::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void InProcessTransport::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& b : mailboxes_) b.messages.clear();
  aborted_ = false;
  abort_reason_.clear();
}

size_t InProcessTransport::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& b : mailboxes_) n += b.messages.size();
  return n;
}

size_t InProcessTransport::awaited() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& b : mailboxes_) n += b.awaited.size();
  return n;
}

}  // namespace tandem::transport
