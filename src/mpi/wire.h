// The wire format of one tensor message between ranks (an internal detail of MpiTransport).
//
// A message is a header (tag kHeaderTag) followed by the payload (tag kPayloadTag): the raw
// bytes of the contiguous tensor, cut into chunks of at most kMaxChunkBytes because MPI counts
// are ints. The header says everything the receiver needs to allocate the buffer and file the
// tensor under its key, so shapes may change from one micro-batch to the next:
//
//   u32 magic | u32 version | i32 step | i32 microbatch | u8 gradient | i32 from_stage |
//   i32 to_stage | i64 run | i16 dtype (c10::ScalarType) | i32 ndim | i64 sizes[ndim] | i64 nbytes
//   | u32 name length | name bytes
//
// Integers are in the sender's byte order: all ranks of a job run on the same architecture.
// MPI matches messages between two ranks on one communicator and tag in order, so the k-th
// payload from a peer belongs to the k-th header from it. It does not complete them in order
// (a large payload that goes by rendezvous can finish after a later small one), so the
// receiver files each by its key, and keys are unique (transport::MessageKey::run).
#pragma once

#include <mpi.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/transport/transport.h"

namespace tandem::mpi {

inline constexpr int kHeaderTag = 7001;
inline constexpr int kPayloadTag = 7002;
inline constexpr int64_t kMaxChunkBytes = int64_t{1} << 30;

struct WireHeader {
  transport::MessageKey key;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes;
  int64_t nbytes = 0;  // numel * element size
};

std::vector<char> encode_header(const WireHeader& header);
// Throws tandem::Error on a malformed or foreign header (wrong magic or version).
WireHeader decode_header(const char* data, size_t size);

// The number of payload chunks for `nbytes` (0 for an empty tensor), and the size of chunk i.
int64_t chunk_count(int64_t nbytes);
int chunk_bytes(int64_t nbytes, int64_t index);

// The MPI datatype that sums `dtype` element by element, or MPI_DATATYPE_NULL when MPI has no
// such type (half, bfloat16, bool, complex): those are summed in a wider type by the caller.
MPI_Datatype mpi_sum_type(c10::ScalarType dtype);

}  // namespace tandem::mpi
