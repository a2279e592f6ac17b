#include "tandem/train/volume_source.h"

#include <fmt/ranges.h>

#include <array>
#include <functional>
#include <mutex>
#include <vector>

#include "data/batching.h"
#include "data/normalize.h"
#include "tandem/common/check.h"
#include "tandem/data/mri.h"
#include "tandem/data/nifti.h"
#include "tandem/data/nifti_folder.h"
#include "tandem/data/regression.h"
#include "tandem/data/spheres.h"

namespace tandem::train {

namespace {

// Draws `count` consecutive samples starting at `first` of the training set (held_out false)
// or of the held-out set, with the indices each set uses on its own ([0, size)).
using DrawFn = std::function<data::VolumeBatch(int64_t first, int count, bool held_out)>;

class VolumeSource : public Source {
 public:
  // `normalization`: what the inputs `draw` returns went through (loads what it must).
  VolumeSource(std::string description, DrawFn draw, uint64_t seed, int64_t train_size,
               int64_t test_size, std::vector<int64_t> input_shape,
               std::function<data::Normalization()> normalization,
               std::function<void()> load = nullptr)
      : description_(std::move(description)),
        draw_(std::move(draw)),
        seed_(seed),
        train_size_(train_size),
        test_size_(test_size),
        input_shape_(std::move(input_shape)),
        normalization_(std::move(normalization)),
        load_(std::move(load)) {}

  data::Normalization normalization() const override { return normalization_(); }

  std::vector<int64_t> input_shape() const override { return input_shape_; }
  // float32 inputs of C channels and a one-channel float32 target.
  int64_t sample_bytes() const override {
    int64_t voxels = 1;
    for (size_t i = 1; i < input_shape_.size(); ++i) voxels *= input_shape_[i];
    return (input_shape_[0] + 1) * voxels * 4;
  }
  void load() const override {
    if (load_) load_();
  }

  int64_t train_size() const override { return train_size_; }
  int64_t test_size() const override { return test_size_; }

  Batch train_batch(int64_t epoch, int64_t begin, int64_t end) const override {
    TANDEM_CHECK(epoch >= 0, "epoch {} must be >= 0", epoch);
    check_range("training", begin, end, train_size_);
    std::vector<int64_t> idx;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (epoch != order_epoch_) {
        order_ = data::shuffled_indices(train_size_, seed_, epoch);
        order_epoch_ = epoch;
      }
      idx.assign(order_.begin() + begin, order_.begin() + end);
    }
    // Shuffled indices are rarely consecutive: draw sample by sample.
    std::vector<torch::Tensor> inputs, targets;
    for (int64_t i : idx) {
      data::VolumeBatch b = draw_(i, 1, /*held_out=*/false);
      inputs.push_back(b.input);
      targets.push_back(b.target);
    }
    return {torch::cat(inputs), torch::cat(targets)};
  }

  Batch test_batch(int64_t begin, int64_t end) const override {
    check_range("held-out", begin, end, test_size_);
    data::VolumeBatch b = draw_(begin, static_cast<int>(end - begin), /*held_out=*/true);
    return {b.input, b.target};
  }

  std::string describe() const override { return description_; }

 private:
  static void check_range(const char* set, int64_t begin, int64_t end, int64_t size) {
    TANDEM_CHECK(0 <= begin && begin < end && end <= size,
                 "{} samples [{}, {}) are not a non-empty range within the {} {} samples", set,
                 begin, end, size, set);
  }

  std::string description_;
  DrawFn draw_;
  uint64_t seed_;
  int64_t train_size_, test_size_;
  std::vector<int64_t> input_shape_;
  std::function<data::Normalization()> normalization_;
  std::function<void()> load_;  // null: nothing to read ahead
  mutable std::mutex mutex_;    // guards the epoch order cache below
  mutable int64_t order_epoch_ = -1;
  mutable std::vector<int64_t> order_;
};

}  // namespace

std::unique_ptr<Source> make_volume_source(const std::string& name, int volume, int64_t channels,
                                           uint64_t seed, int64_t train_size, int64_t test_size,
                                           const std::string& mri_dir,
                                           data::Normalization normalization) {
  TANDEM_CHECK(name == "spheres" || name == "mri" || name == "regression",
               "unknown volume data set '{}'; use spheres, mri or regression", name);
  TANDEM_CHECK(volume >= 1, "the volume side must be at least 1, not {}", volume);
  TANDEM_CHECK(channels >= 1, "the number of input channels must be at least 1, not {}", channels);
  TANDEM_CHECK(train_size >= 1, "the training set needs at least 1 sample, not {}", train_size);
  TANDEM_CHECK(test_size >= 0, "the held-out set cannot have {} samples; use 0 or more", test_size);
  TANDEM_CHECK(
      name != "regression" || volume >= data::kMinRegressionSize,
      "Config::data regression needs Config::volume = {} or more (its targets are means over {}^3 "
      "boxes of the input), not {}",
      data::kMinRegressionSize, data::kMinRegressionSize, volume);
  TANDEM_CHECK(name == "regression" || channels == 1,
               "the {} data set has 1 input channel, not {}; use 1 channel, or the regression "
               "data set for several",
               name, channels);
  const std::string sizes =
      fmt::format("{}^3, {} training, {} held-out samples", volume, train_size, test_size);
  const std::vector<int64_t> shape{channels, volume, volume, volume};
  TANDEM_CHECK(normalization.mode != data::Normalize::kDataset,
               "{} cannot be standardized with a data set's moments: {}; use --normalize "
               "per-image or none",
               name,
               name == "mri" ? "it is one scan, standardized over its head by default"
                             : "its samples are generated as they are drawn");
  TANDEM_CHECK(!normalization.head || name == "mri",
               "{} is standardized over all values; over the values > 0 is for --data mri", name);
  if (name == "mri") {
    if (normalization.mode == data::Normalize::kDefault)
      normalization.mode = data::Normalize::kPerImage;
    normalization.head = normalization.mode == data::Normalize::kPerImage;
  } else if (normalization.mode == data::Normalize::kDefault) {
    normalization.mode = data::Normalize::kNone;
  }
  auto recorded = [normalization] { return normalization; };

  if (name == "spheres" || name == "regression") {
    DrawFn generate;
    std::string what;
    if (name == "spheres") {
      auto set = std::make_shared<data::SpheresDataset>(volume, seed);
      generate = [set, train_size](int64_t first, int count, bool held_out) {
        return set->sample(held_out ? train_size + first : first, count);
      };
      what = fmt::format("spheres ({})", sizes);
    } else {
      const int c = static_cast<int>(channels);
      generate = [c, volume, seed, train_size](int64_t first, int count, bool held_out) {
        return data::synthetic_regression(held_out ? train_size + first : first, count, c, volume,
                                          seed);
      };
      what = fmt::format("regression ({} channels, {})", channels, sizes);
    }
    DrawFn draw = generate;
    if (normalization.mode == data::Normalize::kPerImage)
      draw = [generate, normalization](int64_t first, int count, bool held_out) {
        data::VolumeBatch b = generate(first, count, held_out);
        b.input = data::normalized_each(b.input, normalization);
        return b;
      };
    return std::make_unique<VolumeSource>(
        fmt::format("{}; inputs {}", what,
                    normalization.mode == data::Normalize::kNone
                        ? std::string("as generated, not standardized")
                        : data::describe(normalization)),
        std::move(draw), seed, train_size, test_size, shape, recorded);
  }
  const std::string dir = mri_dir.empty() ? kDefaultMriDir : mri_dir;
  // The headers are checked now; the voxels are read on the first draw, so a process that
  // never draws (an MPI rank whose stages read neither the input nor the target) never reads
  // them.
  const std::string image = dir + "/ch2.nii.gz", mask = dir + "/ch2bet.nii.gz";
  const std::array<int64_t, 4> image_shape = data::read_nifti_shape(image);
  const std::array<int64_t, 4> mask_shape = data::read_nifti_shape(mask);
  TANDEM_CHECK(image_shape == mask_shape && image_shape[0] == 1,
               "the MRI image '{}' has shape [{}] [C,Z,Y,X] and its mask '{}' [{}]; they must "
               "match and hold one 3D volume each (C = 1)",
               image, fmt::join(image_shape, ", "), mask, fmt::join(mask_shape, ", "));
  data::MriDataset::check_fits({image_shape[1], image_shape[2], image_shape[3]}, volume,
                               data::MriOptions{}, image);
  struct Lazy {
    std::once_flag once;
    std::unique_ptr<data::MriDataset> set;
  };
  auto lazy = std::make_shared<Lazy>();
  data::MriOptions options;
  options.standardize = normalization.mode == data::Normalize::kPerImage;
  auto load = [lazy, image, mask, volume, seed, options] {
    std::call_once(lazy->once, [&] {
      lazy->set = std::make_unique<data::MriDataset>(image, mask, volume, seed, options);
    });
  };
  DrawFn draw = [lazy, load](int64_t first, int count, bool held_out) {
    load();
    return lazy->set->sample(first, count,
                             held_out ? data::Subset::kHeldOut : data::Subset::kTrain);
  };
  return std::make_unique<VolumeSource>(
      fmt::format("mri crops of {} ({}); {}", dir, sizes,
                  options.standardize ? "the scan standardized over its voxels > 0"
                                      : "the scan's values as stored, not standardized"),
      std::move(draw), seed, train_size, test_size, shape, recorded, std::move(load));
}

std::unique_ptr<Source> make_nifti_source(const std::string& dir, const ModelNeeds& needs,
                                          int volume, int test_files, uint64_t seed,
                                          int64_t train_size, int64_t test_size,
                                          data::Normalization normalization) {
  TANDEM_CHECK(
      needs.volumes && needs.target != ModelNeeds::Target::kClasses,
      "Config::data nifti:{} gives volumes with voxel-wise labels; use Config::model unet3d (0/1 "
      "masks) or conv3d-stack (real-valued labels), or for an ONNX model of volumes "
      "Config::loss = dice or dice+bce (0/1 masks) or mse (real-valued labels)",
      dir);
  TANDEM_CHECK(train_size >= 1, "the training set needs at least 1 sample, not {}", train_size);
  data::NiftiFolderOptions o;
  o.crop = volume;
  o.test_files = test_files;
  o.labels =
      needs.target == ModelNeeds::Target::kMask ? data::LabelKind::kMask : data::LabelKind::kReal;
  o.seed = seed;
  auto set = std::make_shared<data::NiftiFolder>(dir, o, normalization);  // headers only
  const int64_t held_out = test_files > 0 ? test_size : 0;
  DrawFn draw = [set](int64_t first, int count, bool held_out) {
    return set->sample(first, count, held_out ? data::Subset::kHeldOut : data::Subset::kTrain);
  };
  const std::string description = fmt::format(
      "{}^3 crops of {} ({} files, {} channels; {} held out; {} training, {} held-out crops); "
      "{}",
      volume, dir, set->pairs().size(), set->channels(), test_files, train_size, held_out,
      normalization.mode == data::Normalize::kDefault ||
              normalization.mode == data::Normalize::kPerImage
          ? std::string("each image standardized per channel over its voxels")
      : normalization.mode == data::Normalize::kNone
          ? std::string("the images' values as stored, not standardized")
      : normalization.mean.empty()
          ? std::string("standardized per channel with the training files' mean and deviation")
          : data::describe(normalization));
  return std::make_unique<VolumeSource>(
      description, std::move(draw), seed, train_size, held_out,
      std::vector<int64_t>{set->channels(), volume, volume, volume},
      [set] { return set->normalization(); }, [set] { set->load(); });
}

}  // namespace tandem::train
