#include "tandem/mpi/environment.h"

#include <cstdlib>
#include <string>

#include "tandem/common/check.h"
#include "tandem/mpi/handles.h"

namespace tandem::mpi {

namespace {

// Reads a positive integer from the environment; 0 when unset or not a number.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (*end == '\0' && n > 0 && n < (1L << 30)) ? static_cast<int>(n) : 0;
}

bool env_set(const char* name) { return std::getenv(name) != nullptr; }

}  // namespace

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

bool Environment::launched_by_mpirun() {
  return env_set("OMPI_COMM_WORLD_SIZE")      // OpenMPI's mpirun
         || env_set("PMI_SIZE")               // MPICH (hydra), Intel MPI, srun --mpi=pmi2
         || env_set("PMIX_RANK")              // any PMIx launcher (prterun, srun --mpi=pmix)
         || env_set("SLURM_STEP_NUM_TASKS");  // srun (set for job steps, not batch scripts)
}

int Environment::launched_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    if (int n = env_int(name); n > 0) return n;
  }
  return 1;
}

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
