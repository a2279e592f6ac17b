// Applying a trained model to whole volumes (tandem predict): each scan in one piece, cut into
// the run's slabs and stages as training cuts a crop, or in sliding windows, forward only.
//
// A scan [C,D,H,W] is standardized as training standardized it (data::Normalization). In one piece
// it is padded with zeros (the scan's mean, after standardizing) after the last plane of each of D,
// H and W up to the model's multiple (VolumeGrid), run forward through a pipeline of the given
// placement (devices, --spatial, stages, schedule, budget) with the given weights, and the
// model's prediction (graph::Model::prediction: probabilities) cropped back to the scan's grid.
// By windows (WindowOptions) every window lies inside the scan (nothing is padded), each is
// one sample through the same pipeline, and a voxel's prediction is the weighted mean of the
// windows that cover it (Blend).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tandem/train/config.h"
#include "tandem/train/trainer.h"

namespace tandem::train {

class Job;

// How a scan is standardized: as training standardized its samples (data/normalization.h, a
// checkpoint's record). kPerImage per channel over all voxels, as --data nifti:DIR does by
// default; with `head` over the voxels > 0, as --data mri; kDataset with the recorded moments;
// kNone as it is.
inline data::Normalization scan_default_normalization() { return {data::Normalize::kPerImage}; }

// How a scan is padded for the model.
struct VolumeGrid {
  std::array<int64_t, 3> scan{};    // D, H, W of the scan
  std::array<int64_t, 3> padded{};  // each the next multiple of `multiple`
  int64_t multiple = 1;             // the product of the model's down-sampling factors
};

// The grid of a scan of `shape` [C,D,H,W] for the model of `c` (its pooling factor, or an ONNX
// graph's down-sampling). Throws tandem::Error for a model that takes no volumes.
VolumeGrid volume_grid(const Config& c, const std::vector<int64_t>& shape);

// How the windows of a scan are blended where they overlap.
enum class Blend {
  kConstant,  // every voxel of a window weighs 1: the mean of the windows that cover it
  kGaussian,  // a voxel at offset i of a window of side n weighs exp(-(i - (n-1)/2)^2 / (2 s^2))
              // on each axis, s = n / 8, the product over the three axes
};

// Sliding windows: the scan cut into windows of `size` that together cover it, each predicted
// as a sample of its own, the results blended where they overlap.
struct WindowOptions {
  std::array<int64_t, 3> size{};  // D, H, W of a window; all 0: the whole scan in one piece
  double overlap = 0.25;          // in [0, 1): the share of a window its neighbour covers too
  Blend blend = Blend::kGaussian;
  int64_t batch = 1;  // windows per forward (one batch of samples through the pipeline)
  // With Config::device_memory: a scan whose forward in one piece plans over the budget is
  // predicted by the largest windows that plan within it (size left 0).
  bool automatic = false;
};

struct PredictOptions {
  data::Normalization normalization = scan_default_normalization();
  WindowOptions window;
  // Axes (0, 1, 2: D, H, W) whose flips are averaged: the prediction of the scan flipped along
  // every subset of them (2^n forwards), each flipped back (test-time mirroring).
  std::vector<int> mirror;
  std::string path = "the scan";  // names the scan in messages
  // Called after each forward with the forwards done and their total (windows x mirrorings).
  std::function<void(int64_t, int64_t)> progress;
};

// The first plane of every window along one axis of `size` planes: windows of `window` planes
// `step = max(1, floor(window * (1 - overlap)))` apart, ceil((size - window) / step) + 1 of them,
// the i-th at min(i * step, size - window), so that the last ends on the last plane.
std::vector<int64_t> window_starts(int64_t size, int64_t window, double overlap);

// A window's weights [D,H,W] (float32) as `blend` says.
torch::Tensor window_weights(const std::array<int64_t, 3>& size, Blend blend);

struct VolumePrediction {
  // [K,D,H,W] float32 on the scan's grid: the model's prediction for each of its K outputs;
  // undefined in a process that does not run the last stage's first slab (under MPI).
  torch::Tensor output;
  VolumeGrid grid;
  std::array<int64_t, 3> window{};  // the windows' size; the padded grid in one piece
  int64_t windows = 1;              // how many windows cover the scan
  std::string note;                 // why windows were chosen for the user, or empty
  double planned_bytes = 0;         // with Config::device_memory or Config::plan_only: the
                                    // forward's plan (the device that holds the most), else 0
  double seconds = 0;               // the forwards, from the first stage to the last
  // Per local device of the pipeline: its name and the most bytes it held during the forward.
  std::vector<std::pair<std::string, uint64_t>> peak_bytes;
  std::string placement;  // the pipeline's placement table
};

// The Dice of a prediction `p` [K,D,H,W] against `label` [D,H,W] on the same grid: for one
// output the mask p >= `threshold` against label > 0; for K classes the mean over classes
// 1..K-1 of the Dice of argmax == k against label == k. A class absent from both counts 1.
double label_dice(const torch::Tensor& p, const torch::Tensor& label, double threshold = 0.5);

// What predicting a scan takes, decided before any work: its grid, the windows and the model.
struct PredictPlan {
  VolumeGrid grid;                              // padded = scan when by windows
  std::array<int64_t, 3> window{};              // the windows' size; the padded grid in one piece
  std::vector<std::array<int64_t, 3>> origins;  // where each window starts (D slowest)
  std::string note;                             // VolumePrediction::note
  graph::Model model;                           // built for one window
};

// The plan for a scan of `shape` [C,D,H,W] under `c` and `o`. An ONNX graph exported for one
// fixed size is predicted by windows of that size (the note says so). Throws tandem::Error for
// a scan the model does not take (its channels, smaller than a window), windows that are not
// multiples of the model's down-sampling, a model without volumes.
PredictPlan plan_prediction(const Config& c, const std::vector<int64_t>& shape,
                            const PredictOptions& o = {});

// Predicts one scan, `image` [C,D,H,W] as read (standardized as `o.normalization` says) and as
// `plan` planned it, with `c`'s model, placement and weights (Config::init_from: a checkpoint or
// state dict; empty for an ONNX file's own initializers). `job` null: in process; else on the
// job's ranks (collective: every rank calls it with the same scan shape). Config::batch becomes
// the windows per forward and Config::microbatches 1. Throws tandem::Error for options that
// cannot run it, weights that do not fit. With Config::device_memory the forward is planned
// first (runtime/inference_plan.h): over the budget it throws memory::DoesNotFit (status 3)
// before it runs, naming the fewest slabs and the largest windows that would fit (or, with
// WindowOptions::automatic, predicts by those windows); memory::OutOfMemory (status 3) when a
// device exceeds its budget while it runs.
VolumePrediction predict_volume(Job* job, Config c, PredictPlan plan, const torch::Tensor& image,
                                const PredictOptions& o = {});

// plan_prediction, then predict_volume.
VolumePrediction predict_volume(Job* job, Config c, const torch::Tensor& image,
                                const PredictOptions& o = {});

// Whether `c`'s model takes volumes (scans: predict_volume) or other samples (images:
// predict_images). An ONNX graph takes volumes when its samples are [C,D,H,W].
bool predicts_volumes(const Config& c);

struct ImagesPrediction {
  // [N,K] float32 (or [N,...]: the model's output per image): the model's prediction (its
  // softmax over classes); undefined in a process without the last stage's output (MPI).
  torch::Tensor output;
  double seconds = 0;  // the forwards
  std::vector<std::pair<std::string, uint64_t>> peak_bytes;
  std::string placement;
};

// Applies `c`'s model and weights (Config::init_from) to `images` [N,...] (each as the model
// takes it, graph::fit_input), `batch` images per forward through a pipeline of `c`'s placement.
// `normalization`: as training standardized (a checkpoint's record): kDataset with its moments,
// or without them over all the values of `images` (as --data mnist does its training set's);
// kPerImage each image over its own values; kNone as they are; `head` is refused. `job`: as
// predict_volume. `progress` (may be null): called after each forward with the forwards done and
// their total.
ImagesPrediction predict_images(
    Job* job, Config c, const torch::Tensor& images, int64_t batch,
    const data::Normalization& normalization = {data::Normalize::kDataset},
    const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace tandem::train
