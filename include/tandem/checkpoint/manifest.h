// The manifest: the one file that says what a checkpoint folder holds and how to check it.
//
// `manifest.json` in a checkpoint folder records the format version, the training state, the
// model fingerprint, the partition and world it was saved from, and every shard file with its
// size and CRC-32. A folder named `step-<N>` is complete by construction: the manifest is
// written and fsynced before the folder takes that name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/checkpoint/state.h"
#include "tandem/graph/model.h"

namespace tandem::checkpoint {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kManifestFile = "manifest.json";

// One parameter or buffer, named "<layer>.<name>" as in Pipeline::named_parameters().
struct TensorRecord {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;  // "Float", "Double", "Long", ... (c10::toString of the scalar type)
  bool buffer = false;

  bool operator==(const TensorRecord& o) const {
    return name == o.name && shape == o.shape && dtype == o.dtype && buffer == o.buffer;
  }
};

struct LayerRecord {
  std::string name;
  std::vector<TensorRecord> tensors;  // parameters, then buffers, in the module's order
};

// What a checkpoint must agree with to be loaded into a model: its name, its layers in order and
// each layer's tensors with their shapes. The partition is not part of it.
struct Fingerprint {
  std::string model;
  std::vector<LayerRecord> layers;
};

Fingerprint fingerprint(const graph::Model& model);

// Empty when `current` can take the state saved from `saved`; otherwise one sentence naming the
// first difference (model name, layer count, layer name, tensor name, shape or dtype).
std::string first_difference(const Fingerprint& saved, const Fingerprint& current);

// One stage's shard: `stage-<S>.pt` (tensors) in the checkpoint folder.
struct ShardRecord {
  std::string file;  // relative to the checkpoint folder
  int stage = 0;
  std::vector<std::string> layers;  // the stage's layers, in order
  int64_t bytes = 0;
  uint32_t crc32 = 0;
  std::string optimizer;  // "adam", "adamw", "sgd" or "none"
};

struct Manifest {
  int version = kFormatVersion;
  TrainState state;
  Fingerprint fingerprint;
  // The partition it was saved from (informative: any partition can load it).
  std::vector<int> balance;
  std::vector<int> stage_device;
  std::vector<std::string> devices;
  int replicas = 1;
  int ranks = 1;
  std::vector<ShardRecord> shards;  // by stage
};

std::string to_json_text(const Manifest& m);
// `path` names the file in error messages.
Manifest parse_manifest(const std::string& text, const std::string& path);
Manifest read_manifest(const std::string& checkpoint);

// A shard's record alone (`stage-<S>.json` next to the shard), so that the process that writes
// the manifest needs only a barrier, not a gather, to learn every shard's checksum.
std::string shard_record_to_json_text(const ShardRecord& r);
ShardRecord parse_shard_record(const std::string& text, const std::string& path);

}  // namespace tandem::checkpoint
