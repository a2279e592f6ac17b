// One-file state dicts: a checkpoint consolidated for PyTorch, and initialization from a file
// that PyTorch (or consolidate()) wrote.
//
// Naming: the key of every tensor is "<layer>.<name>", where <layer> is the layer's name in the
// model (e.g. "dense0", "block0.dense1") and <name> the module's parameter or buffer name
// ("weight", "bias", "running_mean"): the names of Pipeline::named_parameters(), and the names
// of a PyTorch model's state_dict() whose top-level modules carry the layer names. For the
// built-in mlp: dense0.weight, dense0.bias, block0.dense0.weight, ..., logits.weight.
//
// Format: one pickled dict {str: Tensor} in PyTorch's zip format (torch::pickle_save), which
// Python reads with torch.load(path). From Python, write one with
//   torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, path)
// (a plain dict: LibTorch 1.13's reader cannot rebuild an OrderedDict, nor a dict of exactly one
// entry, which Python pickles with an opcode that reader lacks; 2.x reads both).
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "tandem/runtime/pipeline.h"

namespace tandem::checkpoint {

// Every parameter and buffer of the checkpoint at `path` (folder or save directory), across all
// its shards, as one pickled state dict in model order (the bytes consolidate() writes), and
// how many tensors it holds. Throws tandem::Error for a checkpoint that is missing or damaged.
struct ConsolidatedDict {
  std::vector<char> bytes;
  int64_t tensors = 0;
};
ConsolidatedDict consolidated_dict(const std::string& path);

// consolidated_dict(path) written to `out_pt` (common/output_path.h: write_output_file, which
// replaces a regular file atomically and refuses anything else). Returns the number of tensors.
int64_t consolidate(const std::string& path, const std::string& out_pt);

// Writes `tensors` (moved to the CPU) as a state dict, in the map's order, as consolidate()
// writes its file.
void save_state_dict_file(const std::map<std::string, torch::Tensor>& tensors,
                          const std::string& path);

// Reads a state dict file; throws tandem::Error naming the file when it is not a dict of
// tensors with string keys.
std::map<std::string, torch::Tensor> load_state_dict_file(const std::string& path);

// Every parameter and buffer of `path` by name: a state dict file, or a checkpoint folder or
// save directory (its shards checked first). CPU tensors.
std::map<std::string, torch::Tensor> read_tensors(const std::string& path);

// Copies the tensors of `path` (a state dict file, or a checkpoint folder or save directory:
// tensors only, no optimizer state, no step) into the parameters and buffers of `pipeline`'s
// local stages, converting the dtype as PyTorch's load_state_dict does. Every parameter and
// buffer of the model must be present with its shape and nothing else may be: otherwise throws
// tandem::Error listing the missing, unexpected and mismatched names, before copying anything.
void init_from(runtime::Pipeline& pipeline, const std::string& path);

}  // namespace tandem::checkpoint
