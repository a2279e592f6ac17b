// Applying a trained model to whole volumes (tandem predict): each scan in one piece, cut into
// the run's slabs and stages as training cuts a crop, forward only.
//
// A scan [C,D,H,W] is standardized as training standardized it (Standardize), padded
// with zeros (the scan's mean, after standardizing) after the last plane of each of D, H and W
// up to the model's multiple (VolumeGrid), run forward through a pipeline of the given
// placement (devices, --spatial, stages, schedule, budget) with the given weights, and the
// model's prediction (graph::Model::prediction: probabilities) cropped back to the scan's grid.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tandem/train/config.h"
#include "tandem/train/trainer.h"

namespace tandem::train {

class Job;

// How a scan is standardized: as training standardized its samples.
enum class Standardize {
  kAll,   // per channel over all voxels, as --data nifti:DIR (data::standardized)
  kHead,  // per channel over the voxels > 0, as --data mri (data::head_standardized)
};

// How a scan is padded for the model.
struct VolumeGrid {
  std::array<int64_t, 3> scan{};    // D, H, W of the scan
  std::array<int64_t, 3> padded{};  // each the next multiple of `multiple`
  int64_t multiple = 1;             // the product of the model's down-sampling factors
};

// The grid of a scan of `shape` [C,D,H,W] for the model of `c` (its pooling factor, or an ONNX
// graph's down-sampling). Throws tandem::Error for a model that takes no volumes.
VolumeGrid volume_grid(const Config& c, const std::vector<int64_t>& shape);

struct VolumePrediction {
  // [K,D,H,W] float32 on the scan's grid: the model's prediction for each of its K outputs;
  // undefined in a process that does not run the last stage's first slab (under MPI).
  torch::Tensor output;
  VolumeGrid grid;
  double seconds = 0;  // the forward, from the first stage to the last
  // Per local device of the pipeline: its name and the most bytes it held during the forward.
  std::vector<std::pair<std::string, uint64_t>> peak_bytes;
  std::string placement;  // the pipeline's placement table
};

// Predicts one scan, `image` [C,D,H,W] as read (standardized here as `standardize` says; `path`
// names it in messages), with `c`'s model,
// placement and weights (Config::init_from: a checkpoint or state dict; empty for an ONNX
// file's own initializers). `job` null: in process; else on the job's ranks (collective: every
// rank calls it with the same scan shape). Config::batch and Config::microbatches are 1: one
// scan is one sample. Throws tandem::Error for a scan the model does not take (its channels, an
// ONNX graph exported for a fixed size), options that cannot run it, weights that do not fit;
// memory::DoesNotFit (status 3) when a device's budget is exceeded.
VolumePrediction predict_volume(Job* job, Config c, const torch::Tensor& image,
                                Standardize standardize = Standardize::kAll,
                                const std::string& path = "the scan");

}  // namespace tandem::train
