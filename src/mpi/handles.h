// RAII owners for MPI handles: communicators and requests. Neither is copyable; both move.
//
// Thread-safety: none. Like every MPI call in tandem, the calls these classes make must come
// from the one thread allowed to call MPI at that moment (see environment.h).
#pragma once

#include <mpi.h>

#include <string>

namespace tandem::mpi {

// Aborts with the MPI error string when `rc` is not MPI_SUCCESS. MPI's default error handler
// already ends the job on failure; this catches handlers that return instead.
void check_mpi(int rc, const char* call);

// Owns a communicator made by MPI_Comm_dup or MPI_Comm_split and frees it on destruction.
// A default-constructed Communicator holds MPI_COMM_NULL and owns nothing.
class Communicator {
 public:
  Communicator() = default;
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;

  // Collective over `parent`: a private copy, so tandem's tags never meet anyone else's.
  static Communicator dup(MPI_Comm parent);
  // Collective over `parent`: ranks with the same `color` form one communicator, ordered by
  // `key` (ties by rank in `parent`).
  static Communicator split(MPI_Comm parent, int color, int key);

  MPI_Comm get() const { return comm_; }
  int rank() const;
  int size() const;
  // Frees the communicator now (MPI_Comm_free); afterwards get() is MPI_COMM_NULL.
  void reset();

 private:
  explicit Communicator(MPI_Comm comm) : comm_(comm) {}
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// Owns one MPI_Request. Post an operation into ptr(), then test() or wait() until done.
// Destroying a request that is still active releases it with MPI_Request_free: MPI then
// finishes it in the background, so whoever owns its buffer must keep it alive (tandem only
// lets that happen when it gives up on a stuck shutdown, and then leaks the buffer on purpose).
class Request {
 public:
  Request() = default;
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;

  // Where MPI_Isend/MPI_Irecv/... write the new request. The previous one must be done.
  MPI_Request* ptr();
  bool active() const { return req_ != MPI_REQUEST_NULL; }
  // True once the operation is complete (and the request released). Never blocks.
  bool test();
  void wait();
  // Waits by testing: at once and yielding for 200 us, then sleeping between tests (50 us,
  // doubling to 2 ms). A blocking MPI call polls without sleeping, so a rank that waits long
  // for the others (while rank 0 measures the planner's costs, say) would take a share of the
  // cores they compute on; this one leaves them the cores.
  void wait_idle();

 private:
  MPI_Request req_ = MPI_REQUEST_NULL;
};

}  // namespace tandem::mpi
