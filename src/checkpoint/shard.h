// A stage's shard: its tensors by name, pickled as one dict {str: Tensor} (torch::pickle_save),
// so that torch.load reads a shard too. Keys:
//   "param/<layer>.<name>"           a parameter
//   "buffer/<layer>.<name>"          a buffer
//   "optim/<layer>.<name>/<field>"   one field of a parameter's optimizer state
// Internal to the checkpoint part.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/optimizer_state.h"
#include "tandem/checkpoint/manifest.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::checkpoint::detail {

struct StageTensors {
  std::map<std::string, torch::Tensor> params;   // CPU copies
  std::map<std::string, torch::Tensor> buffers;  // CPU copies
  std::map<std::string, ParamState> optimizer;   // by parameter name
  std::string optimizer_kind = "none";           // "none": saved without an optimizer

  void merge(StageTensors&& other);
};

// Buffers of a stage's layers, "<layer>.<name>", in layer order.
NamedTensors stage_buffers(const runtime::Pipeline& pipeline, int stage);
// Parameters and buffers of every layer of the model (local or not), in layer order.
NamedTensors model_tensors(const graph::Model& model, bool buffers);

StageTensors collect_stage(const runtime::Pipeline& pipeline, int stage);
std::vector<char> encode_shard(const StageTensors& tensors);
// `path` names the file in error messages.
StageTensors decode_shard(const std::vector<char>& bytes, const std::string& path);

// Reads the shards of `checkpoint` that `wanted` selects (all when null), each checked against
// its record (present, size, CRC-32) before it is decoded, and merges them.
StageTensors read_shards(const std::string& checkpoint, const Manifest& manifest,
                         const std::function<bool(const ShardRecord&)>& wanted = nullptr);
// A shard file's bytes, checked against its record.
std::vector<char> read_verified(const std::string& checkpoint, const ShardRecord& record);

}  // namespace tandem::checkpoint::detail
