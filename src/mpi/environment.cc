#include "mpi/environment.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "mpi/handles.h"
#include "tandem/common/check.h"

// OpenMPI declares its CUDA query here (MPIX_CUDA_AWARE_SUPPORT says whether the library was
// built with CUDA); MPICH 4 declares MPIX_GPU_query_support in mpi.h.
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace tandem::mpi {

Environment::Environment(int* argc, char*** argv) {
  int initialized = 0, finalized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  check_mpi(MPI_Finalized(&finalized), "MPI_Finalized");
  TANDEM_CHECK(!initialized && !finalized,
               "MPI is already {} in this process; create exactly one tandem::mpi::Environment "
               "and let it own MPI_Init_thread and MPI_Finalize",
               finalized ? "finalized" : "initialized");

  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    TANDEM_CHECK(false,
                 "MPI provides thread level {} but tandem needs MPI_THREAD_SERIALIZED: its "
                 "progress thread, not the main thread, makes the MPI calls while training. "
                 "Use an MPI library built with thread support",
                 thread_level_name(provided));
  }
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  check_mpi(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  hostname_.assign(name, len);
  cuda_aware_ = query_cuda_aware();
}

std::string Environment::library_version() const {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  check_mpi(MPI_Get_library_version(text, &len), "MPI_Get_library_version");
  // Some MPIs count the terminating NUL in `len`: read up to it, then keep the first line.
  const std::string version(text, strnlen(text, std::min<size_t>(len, sizeof(text))));
  return version.substr(0, version.find('\n'));
}

bool Environment::query_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support() == 1;
#elif defined(MPIX_GPU_SUPPORT_CUDA)
  int supported = 0;
  return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) == MPI_SUCCESS && supported;
#else
  return false;
#endif
}

Environment::~Environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string Environment::prefix() const { return fmt::format("[r{}/{}]", rank_, size_); }

std::string Environment::thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return fmt::format("thread level {}", level);
  }
}

}  // namespace tandem::mpi
