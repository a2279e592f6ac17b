// What the process launcher says about this process, judged from the environment variables
// MPI launchers set. Needs no MPI and does not initialize it: a build without MPI uses this to
// refuse a launch of several ranks instead of training the whole model once per rank.
#pragma once

namespace tandem {

// True when an MPI launcher started this process: mpirun/mpiexec of OpenMPI, MPICH or Intel
// MPI, a PMIx launcher, or srun.
bool launched_by_mpi_launcher();

// The number of ranks the launcher started; 1 when none did (or it does not say).
int launched_world_size();

// This process's rank as the launcher numbers them; -1 when no launcher says.
int launched_rank();

}  // namespace tandem
