// Where training batches come from. A source yields the samples of a global batch by
// position, so every process and replica can read just its own shard.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tandem/data/normalization.h"

namespace tandem::train {

struct Batch {
  torch::Tensor input;
  torch::Tensor target;
};

class Source {
 public:
  virtual ~Source() = default;
  // Samples per training epoch and in the held-out set.
  virtual int64_t train_size() const = 0;
  virtual int64_t test_size() const = 0;
  // Training samples [begin, end) of `epoch`'s order (shuffled by seed and epoch).
  virtual Batch train_batch(int64_t epoch, int64_t begin, int64_t end) const = 0;
  // Held-out samples [begin, end).
  virtual Batch test_batch(int64_t begin, int64_t end) const = 0;
  virtual std::string describe() const = 0;
  // The shape of one sample's input, e.g. [1,28,28] or [C,D,H,W], known before any sample is
  // read (from the files' headers). The built-in models take their input size from it.
  virtual std::vector<int64_t> input_shape() const = 0;
  // Reads the samples now, for sources that read them on the first batch: the trainer calls it
  // on the processes whose stages read the input or the target, so that a bad file ends the run
  // before its first step. Throws tandem::Error naming the file.
  virtual void load() const {}
  // Bytes of one sample's input and target as batches hold them, known before any is read;
  // 0 when the source cannot say. The trainer checks with it that a batch can fit at all.
  virtual int64_t sample_bytes() const { return 0; }
  // How the inputs are standardized (never kDefault), with the moments a kDataset source
  // measured (it reads the samples for them, as load() does). Checkpoints record it, so that
  // eval, resume and predict apply the same. kDefault: the source does not say (nothing is
  // recorded).
  virtual data::Normalization normalization() const { return {}; }
};

// What a model reads from a batch, for the sources of a user's own files (--data nifti:DIR,
// npy:DIR), which check their files against it when they are made. Shapes: B batch, C
// channels, D,H,W volume.
struct ModelNeeds {
  enum class Target {
    kClasses,  // [B] int64 class labels in [0, classes): cross-entropy (the MLP)
    kMask,     // [B,1,D,H,W] float32 0/1: Dice and binary cross-entropy (the U-Net)
    kReal,     // [B,1,D,H,W] float32: mean squared error (the Conv3D stack)
  };
  bool volumes = false;  // input [B,C,D,H,W]; else any [B,...]
  Target target = Target::kClasses;
  int64_t classes = 10;
  int64_t divisor = 1;  // D, H and W must be multiples of it (the U-Net's poolings)
  // Takes any data set whose samples fit its input (an ONNX graph: checked when the trainer
  // starts), not only those whose kind of input and target match the fields above.
  bool any_data = false;
};

// `name`: mnist | fashion-mnist. `dir` empty: the default folder of that data set. Only the
// files' headers are read here: they must hold unsigned bytes, images [N,H,W] and labels [N]
// of the same N, with the same H x W in both splits (the model takes its inputs from it).
// Otherwise throws tandem::Error naming the files and their shapes. Pixels are read as x/255,
// then `normalization` applies (kDefault: kDataset, the training images' moments).
std::unique_ptr<Source> make_image_source(const std::string& name, const std::string& dir,
                                          uint64_t seed, data::Normalization normalization = {});

}  // namespace tandem::train
