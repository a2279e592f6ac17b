// Tensors read from a file that someone else wrote (a state dict, a shard), checked before use.
// Internal to the checkpoint part.
#pragma once

#include <torch/types.h>

#include <string>

namespace tandem::checkpoint::detail {

// LibTorch's reader (torch::pickle_load) builds each tensor as the view the file describes
// (sizes, strides, storage offset) of the storage the file holds for it, without checking one
// against the other: a damaged or crafted file can describe a tensor that reaches past its
// storage, and reading it reads other memory. Throws tandem::Error naming `path` and `name`
// unless `t` is a dense tensor whose every element lies in its storage.
void check_loaded_tensor(const torch::Tensor& t, const std::string& path, const std::string& name);

}  // namespace tandem::checkpoint::detail
