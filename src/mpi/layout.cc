#include "mpi/layout.h"

#include "tandem/common/check.h"

namespace tandem::mpi {

std::vector<int> Layout::data_parallel_group(int rank) const {
  std::vector<int> group;
  group.reserve(replicas * slabs);
  const int first = slab_group_of(rank) * slabs;
  for (int r = 0; r < replicas; ++r)
    for (int j = 0; j < slabs; ++j) group.push_back(rank_of(r, first + j));
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
  TANDEM_CHECK(slabs >= 1 && stages_devices % slabs == 0,
               "{} stage devices cannot form slab groups of {}: the devices of a replica must be "
               "a multiple of the slabs (PipelineOptions::slabs)",
               stages_devices, slabs);
}

std::string Layout::to_string() const {
  if (slabs > 1)
    return fmt::format("{} stage device{} in groups of {} slabs x {} replica{}", stages_devices,
                       stages_devices == 1 ? "" : "s", slabs, replicas, replicas == 1 ? "" : "s");
  return fmt::format("{} stage device{} x {} replica{}", stages_devices,
                     stages_devices == 1 ? "" : "s", replicas, replicas == 1 ? "" : "s");
}

}  // namespace tandem::mpi
