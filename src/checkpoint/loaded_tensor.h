// Tensors read from a file that someone else wrote (a state dict, a shard), checked before use.
// Internal to the checkpoint part.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/types.h>

#include <string>
#include <vector>

namespace tandem::checkpoint::detail {

// LibTorch's reader (torch::pickle_load) builds each tensor as the view the file describes
// (sizes, strides, storage offset) of the storage the file holds for it, without checking one
// against the other: a damaged or crafted file can describe a tensor that reaches past its
// storage, and reading it reads other memory. Throws tandem::Error naming `path` and `name`
// unless `t` is a dense tensor whose every element lies in its storage.
void check_loaded_tensor(const torch::Tensor& t, const std::string& path, const std::string& name);

// torch::pickle_load of an archive written by torch::pickle_save or torch.save, except that each
// storage is exactly the bytes the archive holds for it. LibTorch's reader sizes a storage by the
// element count the pickle declares, and gives it the record's bytes, which may be fewer: a
// tensor could then read past them. Here a tensor that the bytes cannot hold makes LibTorch
// throw (its storage cannot grow), or check_loaded_tensor refuse it. The pickle's declared
// lengths are checked first (check_pickle_lengths). Throws tandem::Error, or what LibTorch
// throws.
c10::IValue pickle_load_sized(const std::vector<char>& bytes);

}  // namespace tandem::checkpoint::detail
