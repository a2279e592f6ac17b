#include "tandem/mpi/layout.h"

#include "tandem/common/check.h"

namespace tandem::mpi {

std::vector<int> Layout::data_parallel_group(int rank) const {
  std::vector<int> group;
  group.reserve(replicas);
  for (int r = 0; r < replicas; ++r) group.push_back(rank_of(r, stage_device_of(rank)));
  return group;
}

void Layout::validate(int world_size) const {
  TANDEM_CHECK(stages_devices >= 1 && replicas >= 1,
               "the layout needs at least 1 stage device and 1 replica, got {} stage devices "
               "and {} replicas",
               stages_devices, replicas);
  TANDEM_CHECK(stages_devices * replicas == world_size,
               "{} stage devices x {} replicas need {} ranks but the job has {}; start it with "
               "mpirun -n {} or change the partition or the replica count",
               stages_devices, replicas, stages_devices * replicas, world_size,
               stages_devices * replicas);
}

std::string Layout::to_string() const {
  return fmt::format("{} stage device{} x {} replica{}", stages_devices,
                     stages_devices == 1 ? "" : "s", replicas, replicas == 1 ? "" : "s");
}

}  // namespace tandem::mpi
