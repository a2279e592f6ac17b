// The in-process transport: devices are worker threads of one process; a message is a tensor
// reference placed in the receiver's mailbox, and the receiver copies it into its own memory.
// Between CPU devices, a message whose receiver already waits for it is copied by the sender
// instead: the sender's bytes go at its send, not whenever the system wakes the receiver (on
// busy cores that can be after the sender's next action has begun, and the sender's peak then
// depends on timing). The receiver then takes the copy as it is.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "tandem/common/device.h"
#include "tandem/transport/transport.h"

namespace tandem::transport {

class InProcessTransport : public Transport {
 public:
  // `devices[i]` is device i's context (used by recv to copy into the receiver's memory; the
  // contexts must outlive the transport). One replica: data-parallel replicas run as MPI
  // ranks. `timeout` bounds every recv.
  InProcessTransport(std::vector<const DeviceContext*> devices, std::chrono::milliseconds timeout);

  int num_devices() const override { return static_cast<int>(devices_.size()); }
  std::vector<int> local_devices() const override;
  void send(int from_device, int to_device, const MessageKey& key, const torch::Tensor& tensor,
            ReadyEvent ready) override;
  torch::Tensor recv(int to_device, int from_device, const MessageKey& key,
                     c10::Device into) override;
  void all_reduce_sum(int device, std::vector<torch::Tensor>& tensors) override;
  void abort(const std::string& reason) override;
  bool aborted() const override;

  // Messages sent but not received (0 after a clean step).
  size_t pending() const;
  // Receives waiting for their message now.
  size_t awaited() const;
  // Forgets every message and clears the abort, for the next step after a failed one.
  void reset() override;

 private:
  struct Message {
    torch::Tensor tensor;
    ReadyEvent ready;
    bool copied = false;  // already in the receiver's memory (copied by the sender)
  };
  using Id = std::pair<int, MessageKey>;  // (from device, key)
  struct Mailbox {
    std::map<Id, Message> messages;
    std::set<Id> awaited;  // messages a recv waits for now
  };

  std::vector<const DeviceContext*> devices_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Mailbox> mailboxes_;
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace tandem::transport
