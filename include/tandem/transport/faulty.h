// FaultyTransport: wraps any Transport and injects faults into chosen messages, so that tests can
// show what one failure does to a step (in process) and to a job (under MPI). Like LevelDB's
// fault-injecting Env, the code under test sees only a Transport.
//
// A fault acts where its message is sent, so under MPI it fires on the sending rank: every rank
// may wrap its transport with the same list. Kinds:
//   drop           the message is never delivered: its receiver waits out the comm timeout
//   delay          delivered `delay` later (past the comm timeout: the receiver has given up;
//                  reset() discards what is still held, so it never reaches a later step)
//   corrupt-shape  delivered with its payload's elements announced as one flat vector [numel]
//                  ([numel, 1] for a 1-D tensor): under MPI that is the shape the wire header
//                  carries, the bytes are unchanged
//   corrupt-dtype  delivered with its payload's bytes announced as another dtype of the same
//                  element size (float32 as int32, float64 as int64, 16-bit floats as int16, ...)
//   zero           delivered with every element 0, shape and dtype right: values lost on the way,
//                  which only the numbers show (tandem verify's gradients)
//   throw          send() throws tandem::Error naming the message
//
// Text form (parse_fault / Fault::to_string), e.g. for a test program's command line:
//   KIND[:FIELD=VALUE,...]   e.g. "delay:tensor=h1,grad=1,mb=0,ms=3600000"
//   tensor=NAME step=N mb=N grad=0|1 from-stage=N to-stage=N from=DEVICE to=DEVICE
//                   which messages match; a field left out matches any value
//   nth=N           the n-th matching message sent through this wrapper fires (default 1); each
//                   fault fires once
//   ms=N            delay only (required): milliseconds
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tandem/transport/transport.h"

namespace tandem::transport {

enum class FaultKind { kDrop, kDelay, kCorruptShape, kCorruptDtype, kZero, kThrow };

// Which messages a fault applies to; an unset field matches any value.
struct MessageMatch {
  std::optional<std::string> tensor;
  std::optional<int> step, microbatch, from_stage, to_stage;
  std::optional<bool> gradient;
  std::optional<int> from_device, to_device;

  bool matches(int from, int to, const MessageKey& key) const;
};

struct Fault {
  FaultKind kind = FaultKind::kDrop;
  MessageMatch match;
  int nth = 1;                         // the n-th matching message (1-based)
  std::chrono::milliseconds delay{0};  // kDelay only

  std::string to_string() const;  // the text form above; parse_fault(to_string()) is equal
};

// Parses the text form; throws tandem::Error naming the unknown kind, field or bad value.
Fault parse_fault(const std::string& text);

// What a corrupt-shape or corrupt-dtype fault delivers instead of `tensor`: a view of the same
// bytes. Throws tandem::Error for a dtype with no same-size partner (complex, quantized).
torch::Tensor with_wrong_shape(const torch::Tensor& tensor);
torch::Tensor with_wrong_dtype(const torch::Tensor& tensor);

// Thread-safe like the transport it wraps. Owns a thread that delivers delayed messages (when
// a delay fault is given), joined by the destructor; messages still held then are discarded.
class FaultyTransport : public Transport {
 public:
  FaultyTransport(std::shared_ptr<Transport> inner, std::vector<Fault> faults);
  ~FaultyTransport() override;
  FaultyTransport(const FaultyTransport&) = delete;
  FaultyTransport& operator=(const FaultyTransport&) = delete;

  int num_devices() const override { return inner_->num_devices(); }
  std::vector<int> local_devices() const override { return inner_->local_devices(); }
  // Counts the message against every fault that matches it; the first fault whose count
  // reaches its nth fires. Other messages go through unchanged.
  void send(int from_device, int to_device, const MessageKey& key, const torch::Tensor& tensor,
            ReadyEvent ready) override;
  torch::Tensor recv(int to_device, int from_device, const MessageKey& key,
                     c10::Device into) override {
    return inner_->recv(to_device, from_device, key, into);
  }
  void all_reduce_sum(int device, std::vector<torch::Tensor>& tensors) override {
    inner_->all_reduce_sum(device, tensors);
  }
  void abort(const std::string& reason) override { inner_->abort(reason); }
  bool aborted() const override { return inner_->aborted(); }
  // Discards the delayed messages not yet delivered, then resets the wrapped transport. Faults
  // that fired stay spent.
  void reset() override;

  const Transport& inner() const { return *inner_; }
  // How many times fault i fired (0 or 1), and how many delayed messages are still held.
  int fired(size_t i) const;
  size_t held() const;

 private:
  struct Held {
    int from, to;
    MessageKey key;
    torch::Tensor tensor;
    ReadyEvent ready;
  };
  void deliver_delayed();

  std::shared_ptr<Transport> inner_;
  std::vector<Fault> faults_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> matched_;  // per fault: matching messages seen
  std::vector<int> fired_;    // per fault
  std::multimap<std::chrono::steady_clock::time_point, Held> held_;  // by delivery time
  bool stop_ = false;
  std::thread delayer_;  // last: started once everything above exists (only with delay faults)
};

}  // namespace tandem::transport
