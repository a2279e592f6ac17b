// How the ranks of an MPI job map to replicas and stage devices. Rank = device index:
//
//            stage device 0   stage device 1  ...  stage device S-1
//  replica 0     rank 0           rank 1              rank S-1
//  replica 1     rank S           rank S+1            rank 2S-1
//  ...
//
// The data-parallel group of a rank is its column: the ranks holding the same stage device in
// every replica. Weight gradients are summed over that group.
//
// With a spatial split of N slabs, the S stage devices of a replica form S / N groups of N
// consecutive ranks (stage device d holds slab d mod N of group d / N), and the data-parallel
// group of a rank is every rank of its group in every replica: slabs and replicas both sum.
#pragma once

#include <string>
#include <vector>

namespace tandem::mpi {

struct Layout {
  int stages_devices = 1;  // S: devices (ranks) one pipeline is split across
  int replicas = 1;        // R: copies of the pipeline (data parallelism)
  int slabs = 1;           // N: devices per slab group of a spatial split (divides S)

  int rank_of(int replica, int stage_device) const {
    return replica * stages_devices + stage_device;
  }
  int replica_of(int rank) const { return rank / stages_devices; }
  int stage_device_of(int rank) const { return rank % stages_devices; }
  int world_size() const { return stages_devices * replicas; }
  // The slab group of `rank` within its replica (its stage device without a spatial split).
  int slab_group_of(int rank) const { return stage_device_of(rank) / slabs; }

  // The ranks of `rank`'s data-parallel group, ascending (one per replica and slab).
  std::vector<int> data_parallel_group(int rank) const;

  // Throws tandem::Error unless S >= 1, R >= 1, N >= 1 divides S and S * R == world_size, with
  // the numbers.
  void validate(int world_size) const;

  // "2 stage devices x 2 replicas"
  std::string to_string() const;
};

}  // namespace tandem::mpi
