// The transport moves named tensors between devices. It is the only way devices talk.
// Implementations: InProcessTransport (threads of one process), MpiTransport (ranks), and
// FaultyTransport (faulty.h: a wrapper for tests that drops, delays, corrupts or fails messages).
//
// Devices are numbered 0..N-1 across the whole job: under MPI, device = rank; in process,
// device = worker index. With R replicas of a pipeline of S stage-devices,
// device = replica * S + stage_device.
#pragma once

#include <torch/types.h>
#include <c10/core/Event.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tandem/common/check.h"

namespace tandem::transport {

// One message: the tensor `tensor` of micro-batch `microbatch` in step `step`, going from stage
// `from_stage` to stage `to_stage`. gradient=false: the activation itself (forward);
// gradient=true: d(loss)/d(tensor) (backward, so it travels from the consumer to the producer).
//
// `run` numbers the pipeline's runs (every forward_backward and every evaluate, from 0, in the
// order a process makes them; the processes of one pipeline make the same calls). Evaluations
// do not advance `step`, so without it the messages of two consecutive evaluations, or of an
// evaluation and the training step after it, would carry the same key: a sender that runs
// ahead would then file its next message under a key the receiver has not taken yet, and a
// transport that completes messages out of order (MPI over TCP, by rendezvous) would hand the
// receiver the wrong one. Every key is unique within a job.
struct MessageKey {
  std::string tensor;
  int step = 0;
  int microbatch = 0;
  bool gradient = false;
  int from_stage = 0;
  int to_stage = 0;
  int64_t run = 0;

  bool operator==(const MessageKey& o) const {
    return tensor == o.tensor && step == o.step && microbatch == o.microbatch &&
           gradient == o.gradient && from_stage == o.from_stage && to_stage == o.to_stage &&
           run == o.run;
  }
  bool operator<(const MessageKey& o) const {
    return std::tie(run, step, microbatch, gradient, from_stage, to_stage, tensor) <
           std::tie(o.run, o.step, o.microbatch, o.gradient, o.from_stage, o.to_stage, o.tensor);
  }
  // "'h1' s0->s1 step 2 mb 3 fwd (run 5)"
  std::string to_string() const;
};

// Marks the moment a tensor's producing kernels are done, on devices that run asynchronously
// (CUDA). Null on CPU, where a tensor is complete when the producing call returns.
using ReadyEvent = std::shared_ptr<c10::Event>;

// Thrown by recv() when abort() was called (by any device); the first error is elsewhere.
class Aborted : public Error {
 public:
  using Error::Error;
};

// Thrown by recv() when a message does not arrive within the communication timeout.
class CommTimeout : public Error {
 public:
  using Error::Error;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Number of devices in the job, and which of them this process owns.
  virtual int num_devices() const = 0;
  virtual std::vector<int> local_devices() const = 0;

  // Starts moving `tensor` to device `to_device` and returns without waiting for the receiver
  // (never blocks on the peer). The transport keeps the tensor alive until it is delivered;
  // the caller must not modify it afterwards. `ready` (may be null) is recorded after the
  // kernels that produce `tensor`. Thread-safe.
  virtual void send(int from_device, int to_device, const MessageKey& key,
                    const torch::Tensor& tensor, ReadyEvent ready) = 0;

  // Blocks until the message `key` from `from_device` arrives, and returns it as a tensor on
  // `into` that shares no storage with the sender's. Throws Aborted after abort(), and
  // CommTimeout (naming the key and the peer) after the communication timeout. Thread-safe.
  virtual torch::Tensor recv(int to_device, int from_device, const MessageKey& key,
                             c10::Device into) = 0;

  // Sums `tensors` (in place) across the data-parallel group of `device`: the devices that
  // hold the same stages in the other replicas. A no-op when there is one replica.
  virtual void all_reduce_sum(int device, std::vector<torch::Tensor>& tensors) = 0;

  // Ends every pending and future recv with Aborted. Idempotent and thread-safe. Under MPI it
  // also ends the job on every rank.
  virtual void abort(const std::string& reason) = 0;
  virtual bool aborted() const = 0;

  // Recovers from a failed step so that the next one can run: the runtime calls it once every
  // device of this process has stopped (no send or recv in flight), whatever the failure.
  // Each transport says what recovering means: in process, every message still in a mailbox
  // is forgotten and the abort cleared; under MPI the failure has already ended the job
  // (abort() does not return), so there is nothing to recover.
  virtual void reset() = 0;
};

}  // namespace tandem::transport
