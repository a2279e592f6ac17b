// A folder of one's own volumes: image and label NIfTI files in pairs, for training on random
// crops and scoring on crops of held-out files.
//
//   DIR/images/NAME   the image: 3D [Z,Y,X], or 4D with one volume per channel (nifti.h)
//   DIR/labels/NAME   its label: 3D, the same [Z,Y,X]
//
// NAME ends in .nii or .nii.gz; files of other names are ignored. Pairs are taken in the
// byte order of their names; the last `test_files` of them are held out, the others train.
//
// What a label means depends on the loss (LabelKind): kMask, for Dice and binary
// cross-entropy (the U-Net), needs every voxel 0 (background) or 1 (foreground); a label with
// other values (several classes: 0, 1, 2, 4, ...) is refused, naming the file and the values,
// because merging classes silently would train on a task the user did not ask for. kReal, for
// the mean squared error (the Conv3D stack), takes the values as they are.
//
// Images are standardized as the folder's Normalization says (data/normalization.h): by
// default per file and per channel to zero mean and unit deviation over all their voxels (a
// constant channel only loses its mean). Shapes: S crop side, C channels.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "tandem/data/normalization.h"
#include "tandem/data/volume_batch.h"

namespace tandem::data {

enum class LabelKind { kMask, kReal };

// How every image is standardized for training, and for tandem predict: per channel, (x - mean)
// / deviation over all its voxels, computed in double (a constant channel is only centred).
// image [C,Z,Y,X] of any real dtype -> float32.
torch::Tensor standardized(const torch::Tensor& image);

struct NiftiPair {
  std::string name;                // the file name shared by the image and the label
  std::string image, label;        // paths
  std::array<int64_t, 4> shape{};  // the image's [C,Z,Y,X]
};

// The pairs of `dir`, sorted by name, with their shapes from the headers alone. Throws
// tandem::Error naming the file for: a missing images/ or labels/ folder, no NIfTI file in
// images/, an image without its label or a label without its image, a header nifticlib
// rejects, a label that is not 3D or whose [Z,Y,X] differs from its image's, and two images
// with different channel counts.
std::vector<NiftiPair> list_nifti_pairs(const std::string& dir);

struct NiftiFolderOptions {
  int crop = 32;       // S
  int test_files = 1;  // the last pairs by name, held out
  LabelKind labels = LabelKind::kMask;
  uint64_t seed = 0;
};

// Crop i of a subset is a pure function of (seed, subset, i). Training crop i: a training file
// drawn uniformly, then an origin drawn uniformly from those that keep the crop inside it.
// Held-out crop i: held-out file i mod test_files, its origin drawn the same way from another
// stream. The constructor reads the headers only; the voxels are read on load() or on the
// first sample(), all files at once, into memory (float32). Methods are thread-safe.
class NiftiFolder {
 public:
  // Throws as list_nifti_pairs, and for test_files outside 0..pairs-1 and a crop larger than
  // a file (naming it, its shape and the largest crop every file allows).
  // `normalization`: kDefault or kPerImage, each file by its own moments (standardized());
  // kDataset, per channel by the moments over the training files' voxels (the held-out files
  // left out), or by the given ones; kNone, as stored. `head` is refused.
  NiftiFolder(const std::string& dir, NiftiFolderOptions options, Normalization normalization = {});

  const std::vector<NiftiPair>& pairs() const { return pairs_; }
  int64_t channels() const { return pairs_.front().shape[0]; }
  int64_t train_files() const { return static_cast<int64_t>(pairs_.size()) - options_.test_files; }

  // Reads every file now (once). Throws tandem::Error naming the file for what read_nifti
  // rejects and, with kMask, for a label that is not 0/1.
  void load() const;
  // The normalization applied, with the moments kDataset measured (loads the files).
  Normalization normalization() const;

  // Crops first .. first + count - 1 of `subset`: input [count,C,S,S,S] float32, target
  // [count,1,S,S,S] float32. Held-out crops need test_files > 0.
  VolumeBatch sample(int64_t first, int count, Subset subset) const;

 private:
  std::vector<NiftiPair> pairs_;
  NiftiFolderOptions options_;
  mutable std::once_flag loaded_;
  mutable std::vector<torch::Tensor> images_;  // per pair [C,Z,Y,X], normalized
  mutable std::vector<torch::Tensor> labels_;  // per pair [1,Z,Y,X]
  Normalization asked_;                        // as given to the constructor
  mutable Normalization normalization_;        // as applied; written under loaded_
};

}  // namespace tandem::data
