#include "mpi/mailbox.h"

#include "mpi/wire.h"

namespace tandem::mpi {

void Mailbox::deliver(int peer, const transport::MessageKey& key, torch::Tensor tensor) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stash_[{peer, key}].push_back(std::move(tensor));
  }
  cv_.notify_all();
}

torch::Tensor Mailbox::take(int peer, const transport::MessageKey& key,
                            Clock::time_point deadline) {
  // Counts this receiver in waiting_ and lists it in waits_ from its first wait until it
  // returns or throws. raise() and the destructor run with mu_ held.
  struct WaitRecord {
    Mailbox& box;
    std::optional<std::list<Wait>::iterator> entry;
    void raise(Wait wait) {
      ++box.waiting_;
      entry = box.waits_.insert(box.waits_.end(), std::move(wait));
    }
    ~WaitRecord() {
      if (!entry) return;
      --box.waiting_;
      box.waits_.erase(*entry);
    }
  };

  std::unique_lock<std::mutex> lock(mu_);
  WaitRecord record{*this, std::nullopt};  // destroyed before `lock` releases mu_
  const auto slot = std::make_pair(peer, key);
  for (;;) {
    if (aborted_.load()) throw transport::Aborted("the transport was aborted: " + reason_);
    auto it = stash_.find(slot);
    if (it != stash_.end()) {
      torch::Tensor t = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) stash_.erase(it);
      return t;
    }
    if (Clock::now() >= deadline) {
      gave_up_ = record.entry ? **record.entry : Wait{peer, key, Clock::now()};
      gave_up_->gave_up = true;
      return {};
    }
    if (!record.entry) {
      record.raise(Wait{peer, key, Clock::now()});
      if (on_wait_) {
        lock.unlock();
        on_wait_();
        lock.lock();
        continue;  // it may have arrived meanwhile
      }
    }
    cv_.wait_until(lock, deadline);
  }
}

bool Mailbox::abort(const std::string& reason) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_.load()) {
      first = true;
      reason_ = reason;
      aborted_.store(true);
    }
  }
  cv_.notify_all();
  return first;
}

std::vector<transport::MessageKey> Mailbox::stashed(int peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<transport::MessageKey> keys;
  for (const auto& [slot, tensors] : stash_) {
    if (slot.first == peer) keys.insert(keys.end(), tensors.size(), slot.second);
  }
  return keys;
}

bool Mailbox::waits_only_for(const std::function<bool(int)>& wakes) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Wait& w : waits_)
    if (!wakes(w.peer)) return false;
  return true;
}

std::optional<Mailbox::Wait> Mailbox::longest_wait() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!waits_.empty()) return waits_.front();
  if (!gave_up_) return std::nullopt;
  Wait wait = *gave_up_;
  wait.arrived_since = stash_.count({wait.peer, wait.key}) > 0;
  return wait;
}

}  // namespace tandem::mpi
