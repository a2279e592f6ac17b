// The MPI environment of one process: MPI_Init_thread in the constructor, MPI_Finalize in the
// destructor. Construct exactly one, on the main thread, before anything else touches MPI, and
// destroy it last (after every MpiTransport).
//
// Thread level: MPI_THREAD_SERIALIZED. While an MpiTransport exists, its progress thread makes
// every MPI call of the process (sends, receives, all-reduces, the helpers, MPI_Abort); before
// and after, the main thread does (init, finalize, communicator setup). So MPI is called from
// more than one thread, never from two at once. FUNNELED would forbid the progress thread
// (it is not the thread that called MPI_Init_thread); MULTIPLE is not needed and is slower or
// missing in some MPI builds. The constructor throws if MPI provides less than SERIALIZED.
#pragma once

#include <mpi.h>

#include <string>

namespace tandem::mpi {

class Environment {
 public:
  // Initializes MPI (argc/argv may be null). Throws tandem::Error when MPI is already
  // initialized in this process, or when it provides a thread level below SERIALIZED.
  Environment(int* argc = nullptr, char*** argv = nullptr);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
  Environment(Environment&&) = delete;
  Environment& operator=(Environment&&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // MPI_Get_processor_name: the node this rank runs on.
  const std::string& hostname() const { return hostname_; }
  // "[r2/4]": the prefix of every line a rank prints about the job.
  std::string prefix() const;
  MPI_Comm world() const { return MPI_COMM_WORLD; }
  // Whether this MPI reads and writes CUDA device memory itself (asked at run time: OpenMPI's
  // MPIX_Query_cuda_support, MPICH's MPIX_GPU_query_support; false for other MPIs).
  bool cuda_aware() const { return cuda_aware_; }
  // The first line of MPI_Get_library_version: "Open MPI v4.1.4, package: ...".
  std::string library_version() const;

  // "MPI_THREAD_SERIALIZED" for MPI_THREAD_SERIALIZED, and so on.
  static std::string thread_level_name(int level);

 private:
  static bool query_cuda_aware();

  int rank_ = 0;
  int size_ = 1;
  std::string hostname_;
  bool cuda_aware_ = false;
};

}  // namespace tandem::mpi
