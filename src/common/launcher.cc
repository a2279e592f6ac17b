#include "common/launcher.h"

#include <cstdlib>
#include <initializer_list>

namespace tandem {

namespace {

// Reads a positive integer from the environment; 0 when unset or not a number.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (*end == '\0' && n > 0 && n < (1L << 30)) ? static_cast<int>(n) : 0;
}

// Reads a rank (0 or more) from the environment; -1 when unset or not a number.
int env_rank(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (*end == '\0' && n >= 0 && n < (1L << 30)) ? static_cast<int>(n) : -1;
}

bool env_set(const char* name) { return std::getenv(name) != nullptr; }

}  // namespace

bool launched_by_mpi_launcher() {
  return env_set("OMPI_COMM_WORLD_SIZE")      // OpenMPI's mpirun
         || env_set("PMI_SIZE")               // MPICH (hydra), Intel MPI, srun --mpi=pmi2
         || env_set("PMIX_RANK")              // any PMIx launcher (prterun, srun --mpi=pmix)
         || env_set("SLURM_STEP_NUM_TASKS");  // srun (set for job steps, not batch scripts)
}

int launched_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    if (int n = env_int(name); n > 0) return n;
  }
  return 1;
}

int launched_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (int r = env_rank(name); r >= 0) return r;
  }
  return -1;
}

}  // namespace tandem
