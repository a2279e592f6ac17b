#include <fmt/ranges.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "data/batching.h"
#include "data/moments.h"
#include "data/normalize.h"
#include "tandem/common/check.h"
#include "tandem/data/mnist.h"
#include "tandem/train/source.h"

namespace tandem::train {

namespace {

// Reads the files' headers at construction (for the sizes) and their data on the first batch
// asked for: a process that never asks (an MPI rank whose stages read neither the input nor
// the target) never reads the images.
class ImageSource : public Source {
 public:
  using Loader = std::function<data::ImageDataset(data::Split, data::Pixels)>;
  ImageSource(std::string name, std::string key, Loader load, int64_t train_size, int64_t test_size,
              int64_t height, int64_t width, uint64_t seed, data::Normalization normalization)
      : name_(std::move(name)),
        key_(std::move(key)),
        load_(std::move(load)),
        train_size_(train_size),
        test_size_(test_size),
        height_(height),
        width_(width),
        seed_(seed),
        normalization_(std::move(normalization)) {}

  int64_t train_size() const override { return train_size_; }
  int64_t test_size() const override { return test_size_; }

  Batch train_batch(int64_t epoch, int64_t begin, int64_t end) const override {
    const Loaded& d = loaded();
    std::lock_guard<std::mutex> lock(order_mutex_);
    if (epoch != order_epoch_) {
      order_ = data::shuffled_indices(d.train.size(), seed_, epoch);
      order_epoch_ = epoch;
    }
    data::ImageBatch b = data::gather(d.train, order_, begin, end);
    return {pixels(b.images, d.normalization), b.labels};
  }

  Batch test_batch(int64_t begin, int64_t end) const override {
    const Loaded& d = loaded();
    return {pixels(d.test.images.slice(0, begin, end), d.normalization),
            d.test.labels.slice(0, begin, end)};
  }

  std::string describe() const override {
    // Made before the images are read: the moments to be measured are not named.
    return fmt::format("{} ({} training, {} test images); pixels /255, then {}", name_, train_size_,
                       test_size_, data::describe(normalization_));
  }

  data::Normalization normalization() const override {
    if (normalization_.mode == data::Normalize::kDataset && normalization_.mean.empty())
      return loaded().normalization;
    return normalization_;
  }

  // One grey channel of the files' height x width (both splits have the same, checked at make).
  std::vector<int64_t> input_shape() const override { return {1, height_, width_}; }

  void load() const override { loaded(); }
  // float32 pixels and an int64 label.
  int64_t sample_bytes() const override { return height_ * width_ * 4 + 8; }

 private:
  // The images are kept as the files' bytes (a quarter of float32's memory) and each batch's
  // made from them: each pixel's float32 value, bit for bit as from the whole set at once.
  struct Loaded {
    data::ImageDataset train, test;     // images uint8
    data::Normalization normalization;  // as applied, with the measured moments
  };

  // By default pixels are standardized with the training set's mean and deviation, as is usual
  // for these data sets: it speeds up training of the unnormalized-input models noticeably.
  const Loaded& loaded() const {
    std::call_once(load_once_, [this] {
      data_ = shared_loaded(key_, [this] {
        Loaded d{load_(data::Split::kTrain, data::Pixels::kBytes),
                 load_(data::Split::kTest, data::Pixels::kBytes), normalization_};
        TANDEM_CHECK(d.train.size() == train_size_ && d.test.size() == test_size_,
                     "{} changed while it was read: {} training and {} test images, its headers "
                     "said {} and {}",
                     name_, d.train.size(), d.test.size(), train_size_, test_size_);
        if (d.normalization.mode == data::Normalize::kDataset && d.normalization.mean.empty()) {
          // Over every pixel's float32 value in order: data::dataset_moments of the scaled
          // images (one channel), without making them.
          const data::Moments m = data::moments_of_bytes(
              d.train.images, data::scaled_pixels(torch::arange(256, torch::kUInt8)));
          d.normalization.mean = {m.mean};
          d.normalization.deviation = {m.stddev};
          d.normalization.in_float32 = true;  // as MNIST's pixels always were
        }
        return d;
      });
    });
    return *data_;
  }

  // Bytes [B,1,H,W] as the standardized float32 pixels `n` says.
  static torch::Tensor pixels(const torch::Tensor& bytes, const data::Normalization& n) {
    torch::Tensor x = data::scaled_pixels(bytes);
    data::normalize_each_in_place(x, n);
    return x;
  }

  // The images as loaded() makes them, shared by this process's sources of the same files read
  // the same way (`key`) while any of them holds them: `tandem verify`'s split run and its two
  // one-device references read and standardize 60,000 images once, not three times.
  static std::shared_ptr<const Loaded> shared_loaded(const std::string& key,
                                                     const std::function<Loaded()>& load) {
    static std::mutex mutex;
    static std::map<std::string, std::weak_ptr<const Loaded>> held;
    std::lock_guard<std::mutex> lock(mutex);
    if (std::shared_ptr<const Loaded> d = held[key].lock()) return d;
    auto d = std::make_shared<const Loaded>(load());
    held[key] = d;
    return d;
  }

  std::string name_;
  std::string key_;  // the files and the normalization: equal keys load equal images
  Loader load_;
  int64_t train_size_, test_size_;
  int64_t height_, width_;
  uint64_t seed_;
  data::Normalization normalization_;  // resolved: never kDefault
  mutable std::once_flag load_once_;
  mutable std::shared_ptr<const Loaded> data_;  // written once, under load_once_
  mutable std::mutex order_mutex_;              // guards the epoch order cache below
  mutable int64_t order_epoch_ = -1;
  mutable std::vector<int64_t> order_;
};

}  // namespace

std::unique_ptr<Source> make_image_source(const std::string& name, const std::string& dir,
                                          uint64_t seed, data::Normalization normalization) {
  using Inspect = data::ImageFiles (*)(const std::string&, data::Split);
  using Load = data::ImageDataset (*)(const std::string&, data::Split, data::Pixels);
  Inspect inspect = nullptr;
  Load load = nullptr;
  std::string d = dir;
  if (name == "mnist") {
    inspect = data::inspect_mnist;
    load = data::load_mnist;
    if (d.empty()) d = data::kDefaultMnistDir;
  } else if (name == "fashion-mnist") {
    inspect = data::inspect_fashion_mnist;
    load = data::load_fashion_mnist;
    if (d.empty()) d = data::kDefaultFashionMnistDir;
  }
  TANDEM_CHECK(inspect, "unknown image data set '{}'; use mnist or fashion-mnist", name);
  if (normalization.mode == data::Normalize::kDefault)
    normalization.mode = data::Normalize::kDataset;
  if (normalization.mode == data::Normalize::kDataset) normalization.in_float32 = true;
  TANDEM_CHECK(!normalization.head,
               "{} has no background to leave out: standardize over all the pixels", name);
  // Shapes are checked now, from the headers: a mismatch found at the first step (or at the
  // evaluation, after all of the training) would be LibTorch's message about a product.
  const data::ImageFiles train = inspect(d, data::Split::kTrain);
  const data::ImageFiles test = inspect(d, data::Split::kTest);
  TANDEM_CHECK(train.height == test.height && train.width == test.width,
               "the training images '{}' are {}x{} but the test images '{}' are {}x{}: both splits "
               "of a data set must have one image size",
               train.images, train.height, train.width, test.images, test.height, test.width);
  // The key holds each images file's size and time of change: files rewritten between two
  // sources are read again.
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}", name, d, static_cast<int>(normalization.mode),
                                normalization.in_float32, fmt::join(normalization.mean, ","),
                                fmt::join(normalization.deviation, ","));
  for (const std::string& path : {train.images, test.images, train.labels, test.labels})
    key += fmt::format("|{}:{}", std::filesystem::file_size(path),
                       std::filesystem::last_write_time(path).time_since_epoch().count());
  return std::make_unique<ImageSource>(
      name, std::move(key),
      [d, load](data::Split split, data::Pixels pixels) { return load(d, split, pixels); },
      train.count, test.count, train.height, train.width, seed, std::move(normalization));
}

}  // namespace tandem::train
