#include "mpi/wakeups.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>
#include <string>

#include "mpi/handles.h"

// sem_clockwait (a deadline on the monotonic clock) came with glibc 2.30; before it,
// sem_timedwait on the wall clock.
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30))
#define TANDEM_SEM_CLOCKWAIT 1
#endif

namespace tandem::mpi {

Wakeups::Wakeups(MPI_Comm comm) {
  int size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  // One name per job (rank 0's process and a random number), then one per rank.
  char base[64] = {};
  if (rank_ == 0) {
    std::random_device entropy;
    std::snprintf(base, sizeof base, "/tandem-%d-%08x%08x", static_cast<int>(getpid()), entropy(),
                  entropy());
  }
  check_mpi(MPI_Bcast(base, sizeof base, MPI_CHAR, 0, comm), "MPI_Bcast");
  auto name = [&](int r) { return fmt::format("{}-{}", base, r); };
  sem_t* mine = sem_open(name(rank_).c_str(), O_CREAT | O_EXCL, 0600, 0);
  check_mpi(MPI_Barrier(comm), "MPI_Barrier");
  peers_.assign(static_cast<size_t>(size), nullptr);
  std::vector<char> opened(static_cast<size_t>(size), 0);
  for (int r = 0; r < size; ++r) {
    if (r == rank_) continue;
    sem_t* s = sem_open(name(r).c_str(), 0);
    if (s == SEM_FAILED) continue;  // on another machine, or it has none
    peers_[static_cast<size_t>(r)] = s;
    opened[static_cast<size_t>(r)] = 1;
  }
  check_mpi(MPI_Barrier(comm), "MPI_Barrier");
  if (mine != SEM_FAILED) {
    sem_unlink(name(rank_).c_str());
    own_ = mine;
  } else {
    sem_init(&private_, 0, 0);
    own_ = &private_;
  }
  std::vector<char> all(static_cast<size_t>(size) * static_cast<size_t>(size), 0);
  check_mpi(MPI_Allgather(opened.data(), size, MPI_CHAR, all.data(), size, MPI_CHAR, comm),
            "MPI_Allgather");
  woken_by_.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    woken_by_[static_cast<size_t>(r)] =
        all[static_cast<size_t>(r) * static_cast<size_t>(size) + static_cast<size_t>(rank_)];
}

Wakeups::~Wakeups() {
  for (sem_t* s : peers_)
    if (s) sem_close(s);
  if (own_ == &private_)
    sem_destroy(&private_);
  else
    sem_close(own_);
}

void Wakeups::post(int peer) {
  if (peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return;
  if (sem_t* s = peers_[static_cast<size_t>(peer)]) sem_post(s);
}

void Wakeups::post_self() { sem_post(own_); }

bool Wakeups::wait(std::chrono::microseconds timeout) {
#ifdef TANDEM_SEM_CLOCKWAIT
  const clockid_t clock = CLOCK_MONOTONIC;
#else
  const clockid_t clock = CLOCK_REALTIME;
#endif
  timespec deadline{};
  clock_gettime(clock, &deadline);
  const long long ns = deadline.tv_nsec + static_cast<long long>(timeout.count()) * 1000;
  deadline.tv_sec += static_cast<time_t>(ns / 1000000000);
  deadline.tv_nsec = static_cast<long>(ns % 1000000000);
  int rc = 0;
  do {
#ifdef TANDEM_SEM_CLOCKWAIT
    rc = sem_clockwait(own_, clock, &deadline);
#else
    rc = sem_timedwait(own_, &deadline);
#endif
  } while (rc != 0 && errno == EINTR);
  bool posted = rc == 0;
  while (sem_trywait(own_) == 0) posted = true;
  return posted;
}

bool Wakeups::woken_by(int peer) const {
  if (peer == rank_) return true;  // its messages go straight to the mailbox
  return peer >= 0 && static_cast<size_t>(peer) < woken_by_.size() &&
         woken_by_[static_cast<size_t>(peer)] != 0;
}

}  // namespace tandem::mpi
