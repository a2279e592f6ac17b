// The memory of a forward alone (tandem predict): what each stage holds when nothing is kept
// for a backward.
//
// The bytes are measured, not guessed, as for training (memory_plan.h): one batch runs forward
// through the model on the calling thread without autograd while the CPU allocator hook counts,
// per layer, the most it holds above what was in use before it (its outputs, workspaces, halo
// planes), and every named tensor's size. A stage's planned peak is its parameters plus, at its
// worst layer, that layer's bytes on top of the tensors alive before it: those it received (until
// their last reader in the stage), those it made that a later layer of the stage reads, and
// those it sends to later stages (held until its forward ends: a receiver may take them late).
// On a slab, a layer's bytes include the halo planes it sends (a copy held until the neighbour
// takes it) and those it receives. A neighbour may take the planes late: a layer that exchanges
// none adds the planes sent at the stage's last exchange. Planes a neighbour sends ahead are
// charged to that neighbour until they are received (in process; under MPI the progress thread
// holds them, charged to no device, as every message that arrives early), so they add nothing.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/graph/partition.h"
#include "tandem/spatial/group.h"

namespace tandem::runtime {

struct InferenceBytes {
  std::vector<uint64_t> held;        // per layer: the most its forward holds above what it found
  std::vector<uint64_t> parameters;  // per layer: its parameters' bytes
  std::vector<uint64_t> halo;        // per layer: the halo planes it receives on a slab (else 0)
  std::map<std::string, uint64_t> tensors;  // per named tensor, the graph input included
};

// Runs `input` (a batch on the CPU) forward through `model` without autograd and counts the
// bytes. `group` (null: whole samples): a dry slab group (spatial/group.h) when `input` is one
// slab of a spatial split. `workspace_bound`, `precision`: the layers' (graph::CallContext), as
// the run's.
InferenceBytes measure_inference_bytes(const graph::Model& model, const torch::Tensor& input,
                                       spatial::Group* group = nullptr, int64_t workspace_bound = 0,
                                       c10::ScalarType precision = c10::kFloat);

// The planned peak of every stage of `partition`, as the file comment says.
std::vector<double> inference_peaks(const graph::Model& model, const InferenceBytes& bytes,
                                    const graph::Partition& partition);

// A measurement as JSON text and back, for one process to measure and the others of an MPI
// job to read. Throws Error for text that is not such a measurement.
std::string to_json(const InferenceBytes& bytes);
InferenceBytes inference_bytes_from_json(const std::string& text);

}  // namespace tandem::runtime
