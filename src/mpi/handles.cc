#include "mpi/handles.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "tandem/common/check.h"

namespace tandem::mpi {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  TANDEM_ASSERT(false, "{} failed: {}", call, std::string(text, len));
}

Communicator::~Communicator() { reset(); }

Communicator::Communicator(Communicator&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    reset();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
  }
  return *this;
}

Communicator Communicator::dup(MPI_Comm parent) {
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(parent, &comm), "MPI_Comm_dup");
  return Communicator(comm);
}

Communicator Communicator::split(MPI_Comm parent, int color, int key) {
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(parent, color, key, &comm), "MPI_Comm_split");
  return Communicator(comm);
}

int Communicator::rank() const {
  int r = 0;
  check_mpi(MPI_Comm_rank(comm_, &r), "MPI_Comm_rank");
  return r;
}

int Communicator::size() const {
  int s = 0;
  check_mpi(MPI_Comm_size(comm_, &s), "MPI_Comm_size");
  return s;
}

void Communicator::reset() {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After MPI_Finalize the handle is gone with the library; freeing it would be an error.
  if (!finalized) check_mpi(MPI_Comm_free(&comm_), "MPI_Comm_free");
  comm_ = MPI_COMM_NULL;
}

Request::~Request() {
  if (req_ == MPI_REQUEST_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Request_free(&req_);
}

Request::Request(Request&& other) noexcept : req_(std::exchange(other.req_, MPI_REQUEST_NULL)) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    TANDEM_ASSERT(req_ == MPI_REQUEST_NULL, "overwriting an active MPI request");
    req_ = std::exchange(other.req_, MPI_REQUEST_NULL);
  }
  return *this;
}

MPI_Request* Request::ptr() {
  TANDEM_ASSERT(req_ == MPI_REQUEST_NULL, "posting into an active MPI request");
  return &req_;
}

bool Request::test() {
  if (req_ == MPI_REQUEST_NULL) return true;
  int done = 0;
  check_mpi(MPI_Test(&req_, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

void Request::wait() {
  if (req_ == MPI_REQUEST_NULL) return;
  check_mpi(MPI_Wait(&req_, MPI_STATUS_IGNORE), "MPI_Wait");
}

void Request::wait_idle() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point spin_until = Clock::now() + std::chrono::microseconds(200);
  std::chrono::microseconds pause(50);
  while (!test()) {
    if (Clock::now() < spin_until) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

}  // namespace tandem::mpi
