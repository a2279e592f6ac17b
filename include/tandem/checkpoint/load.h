// Loading a checkpoint into a pipeline, whatever its partition.
//
// Tensors are found by "<layer>.<name>", so a checkpoint saved from 2 stages loads into 3, or
// into one device; optimizer state follows its parameter to whichever stage now holds it.
// Before any tensor is touched, the manifest is checked against the pipeline's model (the first
// difference is named) and every shard to be read against its recorded size and CRC-32: a
// corrupted checkpoint is refused, never half-loaded.
#pragma once

#include <string>
#include <vector>

#include "tandem/checkpoint/manifest.h"
#include "tandem/checkpoint/state.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::checkpoint {

// Loads into `pipeline`'s local stages: parameters and buffers, and the optimizer state of each
// stage that has an optimizer (set_optimizer() first to resume training; without one only the
// tensors are loaded, e.g. to evaluate). Calls pipeline.set_step(state.step) and returns the
// saved TrainState. `path`: a checkpoint folder, or a save directory (its latest complete
// checkpoint). Throws tandem::Error: nothing to load, a different model, a missing, truncated
// or corrupted file, or an optimizer of another kind than the saved state's.
TrainState load(runtime::Pipeline& pipeline, const std::string& path);

// The checkpoint `latest` names when that folder is complete, otherwise the complete
// `step-<N>` with the largest N; "" when `dir` holds none. Temporary folders are ignored.
std::string latest_checkpoint(const std::string& dir);

// Complete checkpoints (`step-<N>` folders with a manifest) under `dir`, by increasing step.
std::vector<std::string> list_checkpoints(const std::string& dir);

// `path` itself when it holds a manifest, else latest_checkpoint(path); throws when neither.
std::string resolve_checkpoint(const std::string& path);

// Reads the manifest and checks every shard's presence, size and CRC-32; returns the manifest.
Manifest verify(const std::string& checkpoint);

}  // namespace tandem::checkpoint
