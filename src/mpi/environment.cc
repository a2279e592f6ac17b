#include "tandem/mpi/environment.h"

#include <string>

#include "tandem/common/check.h"
#include "tandem/mpi/handles.h"

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
  thread_level_ = provided;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  check_mpi(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  hostname_.assign(name, len);
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
