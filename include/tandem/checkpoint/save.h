// Saving a pipeline's training state as a checkpoint folder.
//
// Layout of `dir` (the save directory):
//   step-<N>/manifest.json   what the folder holds, with a CRC-32 and size per shard file
//   step-<N>/stage-<S>.pt    stage S's tensors, pickled by torch::pickle_save (torch.load reads
//   it):
//                              "param/<layer>.<name>", "buffer/<layer>.<name>",
//                              "optim/<layer>.<name>/<field>" (see optimizer_state.h)
//   step-<N>/stage-<S>.json  the shard's own record (file, size, CRC-32, layers, optimizer)
//   latest                   "step-<N>\n": the newest complete checkpoint
//   .tmp-step-<N>/           a save in progress, or one that died; never read
//
// Crash safety: shards and records are written and fsynced into `.tmp-step-<N>`, then the
// manifest, then the folder is renamed to `step-<N>` (the commit point), then `latest` is
// replaced atomically, and only then are checkpoints beyond `keep` removed. A process killed at
// any moment leaves the previous checkpoint complete and `latest` naming a complete one.
#pragma once

#include <functional>
#include <string>

#include "tandem/checkpoint/state.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::checkpoint {

// The processes that hold one training run and save it together. The default is one process
// that holds every stage (in-process devices): nothing to agree on.
//
// Under MPI, every rank calls save() with its own rank and a barrier over all ranks: each rank
// writes its local stages' shards (replica 0 only: other replicas hold the same values), and
// rank 0 writes the manifest once every shard is on disk. A rank that fails to save throws; the
// others then wait in the barrier, which the transport's abort must end.
struct World {
  int rank = 0;
  int ranks = 1;
  int replica = 0;
  int replicas = 1;
  // Returns once every rank has called it; null for one process.
  std::function<void()> barrier;
};

// Moments inside save() where a test can stop the process (e.g. raise(SIGKILL)).
enum class SavePoint {
  kShardsWritten,    // this rank's shards and records are in the temporary folder
  kManifestWritten,  // the manifest is durable; the folder is not renamed yet
  kRenamed,          // `step-<N>` is complete; `latest` still names the previous one
  kLatestWritten,    // `latest` names the new one; older ones are not removed yet
};
const char* to_string(SavePoint point);

struct SaveOptions {
  // Complete checkpoints to keep, the newest by step; 0 keeps all.
  int keep = 3;
  World world;
  // Called at each SavePoint with the folder concerned (temporary or final); for tests.
  std::function<void(SavePoint, const std::string& folder)> hook;
};

// Saves the local stages of `pipeline` (parameters, buffers, optimizer state) and `state` as
// `<dir>/step-<state.step>`, replacing a checkpoint of the same step, and returns that folder.
// `state.step` must equal pipeline.step(). Throws tandem::Error naming the file on I/O errors.
std::string save(const runtime::Pipeline& pipeline, const TrainState& state, const std::string& dir,
                 const SaveOptions& options = {});

// "step-<N>", the name of the checkpoint folder of step N.
std::string checkpoint_name(int64_t step);

// Removes the checkpoints of `dir` (`step-<N>` folders, temporary folders of saves, `latest`),
// and nothing else: how a new run replaces the checkpoints of another. Throws tandem::Error
// naming what could not be removed.
void remove_checkpoints(const std::string& dir);

}  // namespace tandem::checkpoint
