// Waking a rank's progress thread from another rank of the same machine (an internal part of
// MpiTransport).
//
// A progress thread that waits for a message polls MPI, since MPI has no way to sleep until a
// message arrives. Where ranks share cores, every poll takes the core from a rank that
// computes: with 2 ranks of a pipeline on one core, a waiting rank's progress thread woke about
// 3000 times a second. So each rank has a semaphore that the ranks of its machine can post: a
// sender posts its receiver's after sending, and a receiver that waits only for such senders
// sleeps until posted (or a long pause passes), polling far less. Ranks on other machines cannot
// post it, and a receiver waiting for them polls as before.
//
// The semaphores are POSIX named semaphores (sem_open): a rank can open another's exactly when
// both share a machine's /dev/shm, which is what "same machine" means here. Each is unlinked as
// soon as every rank has opened what it could, so nothing stays behind.
#pragma once

#include <mpi.h>
#include <semaphore.h>

#include <chrono>
#include <vector>

namespace tandem::mpi {

class Wakeups {
 public:
  // Collective over `comm` (borrowed; every rank constructs at the same point, with no other
  // thread calling MPI). Where this rank cannot make a named semaphore, it keeps a private one:
  // nobody else can post it, and it still wakes this rank's own thread (post_self).
  explicit Wakeups(MPI_Comm comm);
  ~Wakeups();
  Wakeups(const Wakeups&) = delete;
  Wakeups& operator=(const Wakeups&) = delete;

  // Wakes `peer`'s waiting thread, where this rank opened its semaphore; else nothing.
  // Thread-safe.
  void post(int peer);
  // Wakes this rank's waiting thread. Thread-safe.
  void post_self();
  // Sleeps until posted or `timeout` passes; true when posted. Takes every post made so far.
  // One thread at a time.
  bool wait(std::chrono::microseconds timeout);
  // Whether `peer` posts this rank after sending to it (this rank itself: yes, its messages to
  // itself need no progress thread).
  bool woken_by(int peer) const;

 private:
  int rank_ = 0;
  sem_t* own_ = nullptr;  // named, or else &private_
  sem_t private_{};
  std::vector<sem_t*> peers_;   // per rank: its semaphore, or null
  std::vector<char> woken_by_;  // per rank: whether it opened ours
};

}  // namespace tandem::mpi
