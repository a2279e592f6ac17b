// Applies a Normalization (tandem/data/normalization.h) to tensors: the one code path that
// training's sources, eval and predict standardize with.
//
// Shapes: C channels; an image is [C, ...] (a volume [C,Z,Y,X], an MNIST image [1,H,W]).
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "tandem/data/normalization.h"

namespace tandem::data {

// `image` [C, ...] of any real dtype standardized as `n` says, float32. kPerImage: per channel,
// the moments in double (data::moments, over the values > 0 with n.head; `path` names the image
// when a channel has fewer than two such values). kDataset: per channel (or one pair for all),
// in float32 or double as n.in_float32 says. kNone: the values as float32. kDefault is refused (a
// broken invariant).
torch::Tensor normalized(const torch::Tensor& image, const Normalization& n,
                         const std::string& path = "the image");

// normalized() of each sample of `batch` [B,C,...] (kPerImage: each sample on its own).
torch::Tensor normalized_each(const torch::Tensor& batch, const Normalization& n);

// normalized_each() into `batch` itself where that gives the same values (float32 already, one
// pair for all channels, in float32): a data set of hundreds of MB is not copied twice more. The
// tensor must not share its storage with one that is still used.
void normalize_each_in_place(torch::Tensor& batch, const Normalization& n);

// kDataset's moments per channel over `images` (each [C, ...], the same C), summed over all of
// them in order, in double: the record that normalized() applies.
Normalization dataset_moments(const std::vector<torch::Tensor>& images);

}  // namespace tandem::data
