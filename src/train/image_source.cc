#include "tandem/common/check.h"
#include "tandem/data/batching.h"
#include "tandem/data/mnist.h"
#include "tandem/train/source.h"

namespace tandem::train {

namespace {

class ImageSource : public Source {
 public:
  // Pixels are standardized with the training set's mean and deviation, as is usual for
  // these data sets: it speeds up training of the unnormalized-input models noticeably.
  ImageSource(std::string name, data::ImageDataset train, data::ImageDataset test, uint64_t seed)
      : name_(std::move(name)), train_(std::move(train)), test_(std::move(test)), seed_(seed) {
    const double mean = train_.images.mean().item<double>();
    const double stddev = train_.images.std().item<double>();
    train_.images = (train_.images - mean) / stddev;
    test_.images = (test_.images - mean) / stddev;
  }

  int64_t train_size() const override { return train_.size(); }
  int64_t test_size() const override { return test_.size(); }

  Batch train_batch(int64_t epoch, int64_t begin, int64_t end) const override {
    if (epoch != order_epoch_) {
      order_ = data::shuffled_indices(train_.size(), seed_, epoch);
      order_epoch_ = epoch;
    }
    data::ImageBatch b = data::gather(train_, order_, begin, end);
    return {b.images, b.labels};
  }

  Batch test_batch(int64_t begin, int64_t end) const override {
    return {test_.images.slice(0, begin, end), test_.labels.slice(0, begin, end)};
  }

  std::string describe() const override {
    return fmt::format("{} ({} training, {} test images)", name_, train_.size(), test_.size());
  }

 private:
  std::string name_;
  data::ImageDataset train_, test_;
  uint64_t seed_;
  mutable int64_t order_epoch_ = -1;
  mutable std::vector<int64_t> order_;
};

}  // namespace

std::unique_ptr<Source> make_image_source(const std::string& name, const std::string& dir,
                                          uint64_t seed) {
  if (name == "mnist") {
    std::string d = dir.empty() ? data::kDefaultMnistDir : dir;
    return std::make_unique<ImageSource>(name, data::load_mnist(d, data::Split::kTrain),
                                         data::load_mnist(d, data::Split::kTest), seed);
  }
  if (name == "fashion-mnist") {
    std::string d = dir.empty() ? data::kDefaultFashionMnistDir : dir;
    return std::make_unique<ImageSource>(name, data::load_fashion_mnist(d, data::Split::kTrain),
                                         data::load_fashion_mnist(d, data::Split::kTest), seed);
  }
  TANDEM_CHECK(false, "unknown image data set '{}'; use mnist or fashion-mnist", name);
}

}  // namespace tandem::train
