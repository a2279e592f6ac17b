// The asynchronous MPI operations the progress thread drives (an internal part of
// MpiTransport). An operation owns its buffers and requests: the progress thread calls start()
// once, then test() until it returns true; only then may the operation be destroyed. Both run
// on the progress thread only.
#pragma once

#include <mpi.h>
#include <torch/types.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "mpi/buffer_pool.h"
#include "mpi/handles.h"
#include "mpi/mailbox.h"
#include "mpi/wire.h"

namespace tandem::mpi {

class Operation {
 public:
  virtual ~Operation() = default;
  virtual void start() = 0;
  // True once every request is complete and the result is handed on. Never blocks.
  virtual bool test() = 0;
  // The bytes it moves: how long the progress thread should keep polling it without a pause.
  virtual int64_t bytes() const { return 0; }
  // The rank it sends a message to, whose progress thread is woken once it started (wakeups.h);
  // -1: none.
  virtual int wakes() const { return -1; }
};

// Tells a waiting caller that an operation finished, and carries an exception out of it.
// Thread-safe: finish() on the progress thread, wait() on the caller's.
class Completion {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Outcome { kDone, kTimedOut, kAborted };

  void finish(std::exception_ptr error = nullptr);
  // Waits until finish(), `deadline`, or `aborted()` turns true (asked every 50 ms, since the
  // aborting thread does not know this completion). Rethrows the operation's exception.
  Outcome wait(Clock::time_point deadline, const std::function<bool()>& aborted);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// Sends `header` then the bytes of `payload` (a contiguous tensor, kept alive until every Isend
// completes; on a GPU only when MPI reads device memory) to `peer` on `comm`.
std::unique_ptr<Operation> make_send(MPI_Comm comm, int peer, std::vector<char> header,
                                     torch::Tensor payload);

// Where a receive puts the payload.
struct ReceiveTarget {
  // The CPU, or this rank's GPU when MPI writes device memory (the direct path, staging.h).
  c10::Device device{c10::kCPU};
  bool pinned = false;  // CPU: page-locked memory, for fast copies to a GPU
  // CPU, not pinned: where buffers come from (null: a fresh tensor each time).
  std::shared_ptr<BufferPool> pool;
};

// Receives the payload announced by `header` from `peer` into a new tensor on `target` and
// delivers it to `mailbox`.
std::unique_ptr<Operation> make_receive(MPI_Comm comm, int peer, WireHeader header,
                                        const ReceiveTarget& target, Mailbox& mailbox);

// Sums `buffer` (contiguous CPU, elements of MPI type `type`) in place over `comm`.
std::unique_ptr<Operation> make_all_reduce(MPI_Comm comm, torch::Tensor buffer, MPI_Datatype type,
                                           std::shared_ptr<Completion> done);

// Runs `fn` on the progress thread (it may make blocking MPI calls).
std::unique_ptr<Operation> make_call(std::function<void()> fn, std::shared_ptr<Completion> done);

}  // namespace tandem::mpi
