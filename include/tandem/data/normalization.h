// How a run standardizes its inputs (--normalize), chosen per data kind and recorded in
// checkpoints, so that `tandem eval` and `tandem predict` apply exactly the training's.
//
//   none       the values as read (MNIST's bytes as x/255, NIfTI and npy values as stored)
//   dataset    (x - mean) / deviation with the training inputs' mean and deviation (one pair for
//              all channels, or one per channel), the held-out inputs by the same pair
//   per-image  each image by its own mean and deviation per channel (over its voxels > 0 only
//              where `head` says so: an MRI scan's head, whose background is exactly 0)
//
// A deviation of 0 (a constant image or channel) counts as 1: the values are only centred.
// The tensor functions are in src/data/normalize.h; docs/data.md says each data kind's default.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tandem/common/check.h"

namespace tandem::data {

enum class Normalize {
  kDefault,  // in a Config: the data kind's own (none, dataset or per-image)
  kNone,
  kDataset,
  kPerImage,
};

struct Normalization {
  Normalization() = default;
  Normalization(Normalize mode, bool head = false, std::vector<double> mean = {},
                std::vector<double> deviation = {})
      : mode(mode), head(head), mean(std::move(mean)), deviation(std::move(deviation)) {}

  Normalize mode = Normalize::kDefault;
  bool head = false;  // kPerImage: the moments over the values > 0 only
  // kDataset: one mean and deviation, or one per channel. In a Config, known beforehand (a
  // checkpoint's record, for eval and resume); empty there: measured on the training inputs.
  std::vector<double> mean, deviation;
  // kDataset: (x - mean) / deviation computed in float32 on float32 values (MNIST's pixels
  // always were); false: in double, then rounded to float32 once.
  bool in_float32 = false;

  bool operator==(const Normalization& o) const {
    return mode == o.mode && head == o.head && mean == o.mean && deviation == o.deviation &&
           in_float32 == o.in_float32;
  }
  bool operator!=(const Normalization& o) const { return !(*this == o); }
};

// "default" | "none" | "dataset" | "per-image".
inline const char* normalize_name(Normalize mode) {
  switch (mode) {
    case Normalize::kDefault:
      return "default";
    case Normalize::kNone:
      return "none";
    case Normalize::kDataset:
      return "dataset";
    case Normalize::kPerImage:
      return "per-image";
  }
  return "?";
}

// The inverse of normalize_name (default excepted); throws tandem::Error listing the words.
inline Normalize parse_normalize(const std::string& word) {
  for (Normalize m : {Normalize::kNone, Normalize::kDataset, Normalize::kPerImage})
    if (word == normalize_name(m)) return m;
  TANDEM_CHECK(false, "unknown normalization '{}'; use none, dataset or per-image", word);
  return Normalize::kDefault;
}

// One phrase for the data line and messages, e.g. "per image and channel over its voxels > 0"
// or "with the training inputs' mean 0.1307 and deviation 0.3081".
std::string describe(const Normalization& n);

}  // namespace tandem::data
