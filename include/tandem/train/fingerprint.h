// A fingerprint of a model's parameters, printed in every result line (`weights=`): two runs
// whose fingerprints are equal hold, but for a CRC collision, bitwise equal parameters; one bit
// of one parameter that differs changes it. It does not depend on how the layers are placed:
// one device, a pipeline, MPI ranks, replicas and spatial slabs of the same weights give the
// same fingerprint.
//
// Definition (so that a PyTorch state dict can be checked against it): for every parameter,
// in byte order of the names ("<layer>.<name>", those of `tandem consolidate`), the line
//
//   <name> <sizes joined by x, "-" for a scalar> <CRC-32C of its bytes, little endian, 8 hex>\n
//
// and the fingerprint is the CRC-32C (Castagnoli) of those lines, as 8 lowercase hex digits.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "tandem/runtime/pipeline.h"
#include "tandem/train/job.h"

namespace tandem::train {

// The fingerprint of named parameters (any order: they are sorted by name). A name given twice
// counts once, the first time (the copies of replicas and slabs).
std::string weights_fingerprint(const std::vector<std::pair<std::string, torch::Tensor>>& named);

// The fingerprint of the whole model that a pipeline trains: under MPI each rank's parameters,
// gathered on every rank (collective); in process the pipeline's own.
std::string weights_fingerprint(Job& job, const runtime::Pipeline& pipeline);

}  // namespace tandem::train
