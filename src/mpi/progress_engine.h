// The progress thread of an MpiTransport: the one thread that makes MPI calls while the
// transport lives (see environment.h for why that gives MPI_THREAD_SERIALIZED).
//
// Callers submit operations and wait on their completions; the thread starts them, polls them
// with MPI_Test, and probes for arriving message headers (MPI_Improbe/MPI_Mrecv), posting the
// matching payload receives and filing finished messages in the mailbox. It also answers
// peers that ask what this rank waits for (wait_query.h). It never blocks in
// MPI except inside a submitted call (the collective helpers), so a slow peer delays nothing
// else, and an abort is acted on within one polling interval.
//
// Polling: right after any progress it polls again at once; with receivers waiting or
// operations in flight it keeps polling (yielding) for 200 µs or the time the bytes in flight
// take at 1 GB/s, then sleeps 50 µs growing to 200 µs; with nothing to do, or with receivers
// waiting only for ranks of this machine (which wake it when they send, wakeups.h), up to 2 ms.
// A submit(), a receiver starting to wait, or a rank of this machine sending to this one wakes
// it immediately.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mpi/buffer_pool.h"
#include "mpi/mailbox.h"
#include "mpi/operations.h"
#include "mpi/wakeups.h"

namespace tandem::mpi {

class ProgressEngine {
 public:
  struct Options {
    MPI_Comm comm = MPI_COMM_NULL;  // tensor messages travel here; borrowed, must outlive this
    ReceiveTarget receive_target;   // where payloads land
    std::chrono::duration<double> shutdown_timeout{300.0};
    std::string prefix;  // "[r1/4]", for the messages this thread prints
  };

  // Collective over options.comm (the ranks' wake-ups, wakeups.h), then starts the thread.
  // `mailbox` is borrowed and must outlive the engine.
  ProgressEngine(Options options, Mailbox& mailbox);
  // Collective: stops accepting work, finishes this rank's operations, then waits (still
  // receiving) until every rank of `comm` got here, so no message in flight is cut off. Gives
  // up after shutdown_timeout with a warning on stderr (and leaks what is still in flight).
  ~ProgressEngine();
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Hands `op` to the progress thread. Thread-safe.
  void submit(std::unique_ptr<Operation> op);
  // Runs `fn` on the progress thread and waits for it, rethrowing what it throws. Thread-safe,
  // but not from the progress thread itself.
  void call(std::function<void()> fn);
  // Makes the progress thread poll now. Thread-safe.
  void wake();
  // The progress thread calls MPI_Abort(MPI_COMM_WORLD, exit_status) at its next iteration.
  // Thread-safe.
  void request_abort(int exit_status = 1);

 private:
  void loop();
  bool receive_headers(std::vector<std::unique_ptr<Operation>>& active);
  // Yields or sleeps until the next poll; true when woken (by work, a receiver or a peer).
  bool idle_wait(std::chrono::steady_clock::duration idle_for, bool in_flight,
                 int64_t bytes_in_flight);

  Options options_;
  Mailbox& mailbox_;
  Wakeups wakeups_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Operation>> queue_;  // guarded by mu_
  bool stop_ = false;                              // guarded by mu_
  std::atomic<bool> abort_requested_{false};
  std::atomic<int> abort_status_{1};
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace tandem::mpi
