// Collective helpers for a job's start and end: agreeing on the configuration, aligning
// clocks for merged traces, gathering text on rank 0, and a raw MPI ping-pong to compare
// tandem's transfer rate with.
//
// Each waits for MPI on the calling thread, so call these free functions only while
// no MpiTransport exists; with one, call its members of the same names, which run them on its
// progress thread. All are collective over `comm` (raw_pingpong_gbps: over the pair) — every
// rank must make the same calls in the same order.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::mpi {

// Returns when every rank of `comm` got here; waits as Request::wait_idle does, leaving the
// cores to the ranks that still compute.
void barrier_idle(MPI_Comm comm);

// Returns when every rank passed the same `config_hash`. Otherwise throws tandem::Error on
// every rank, naming which ranks have which `description`:
//   "ranks disagree on the configuration: ranks 0, 2, 3 have 'stages=2'; rank 1 has 'stages=3'"
void agree_on(MPI_Comm comm, uint64_t config_hash, const std::string& description);

// Estimates, in microseconds, what to add to this rank's std::chrono::steady_clock reading to
// get rank 0's (0 on rank 0): Cristian's method, the ping-pong with the smallest round trip of
// `rounds` is kept. Error bound: half that round trip.
double clock_offset_us(MPI_Comm comm, int rounds = 8);

// Rank 0 of `comm` gets every rank's `text`, indexed by rank; other ranks get an empty vector.
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& text);

// Every rank gets every rank's `text`, indexed by rank.
std::vector<std::string> all_gather_strings(MPI_Comm comm, const std::string& text);

// Ping-pongs `bytes` bytes with `peer` `iters` times with plain MPI_Send/MPI_Recv (after one
// untimed round) and returns GB/s counting both directions: 2 * bytes * iters / seconds / 1e9.
// `peer` must call it with this rank as its peer.
double raw_pingpong_gbps(MPI_Comm comm, size_t bytes, int iters, int peer);

}  // namespace tandem::mpi
