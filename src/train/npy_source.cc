#include "tandem/train/npy_source.h"

#include <sys/stat.h>

#include <mutex>
#include <optional>

#include "data/batching.h"
#include "data/moments.h"
#include "data/normalize.h"
#include "tandem/common/check.h"
#include "tandem/data/npy.h"

namespace tandem::train {
namespace {

using Target = ModelNeeds::Target;

std::vector<int64_t> tail(const std::vector<int64_t>& shape, size_t from) {
  return {shape.begin() + static_cast<std::ptrdiff_t>(from), shape.end()};
}

// One split's two files, with their checked headers.
struct Split {
  std::string x_path, y_path;
  data::NpyHeader x, y;
  int64_t size() const { return x.shape[0]; }
};

// The per-sample input shape the model sees: volumes [C,D,H,W] (a [N,D,H,W] array gains C =
// 1), anything else as it is.
std::vector<int64_t> sample_shape(const Split& s, const ModelNeeds& needs) {
  std::vector<int64_t> shape = tail(s.x.shape, 1);
  if (needs.volumes && shape.size() == 3) shape.insert(shape.begin(), 1);
  return shape;
}

// The header checks of one split against the model; `what` names the model's needs.
void check_split(const Split& s, const ModelNeeds& needs) {
  const std::string xs = data::npy_shape_text(s.x.shape), ys = data::npy_shape_text(s.y.shape);
  TANDEM_CHECK(!s.x.shape.empty() && !s.y.shape.empty() && s.x.shape[0] == s.y.shape[0],
               "'{}' has shape {} and '{}' has {}: both need the sample count N first, and the "
               "same N.",
               s.x_path, xs, s.y_path, ys);
  if (!needs.volumes) {
    TANDEM_CHECK(s.x.shape.size() >= 2,
                 "'{}' has shape {}; the model reads samples of at least one feature: (N, "
                 "features...).",
                 s.x_path, xs);
    if (needs.target == ModelNeeds::Target::kReal) {
      TANDEM_CHECK(s.y.shape.size() >= 2 && torch::isFloatingType(s.y.dtype),
                   "'{}' has shape {} and dtype '{}'; mean squared error needs real targets: "
                   "shape ({}, ...) of float32 or float64.",
                   s.y_path, ys, s.y.descr, s.x.shape[0]);
      return;
    }
    TANDEM_CHECK(
        s.y.shape.size() == 1 && (s.y.dtype == torch::kInt64 || s.y.dtype == torch::kUInt8),
        "'{}' has shape {} and dtype '{}'; cross-entropy needs one class label per "
        "sample: shape ({},) of int64 or uint8.",
        s.y_path, ys, s.y.descr, s.x.shape[0]);
    return;
  }
  const size_t rank = s.x.shape.size();
  TANDEM_CHECK(rank == 4 || rank == 5,
               "'{}' has shape {}; a volumetric model reads (N, C, D, H, W) or (N, D, H, W).",
               s.x_path, xs);
  const std::vector<int64_t> space = tail(s.x.shape, rank - 3);
  const std::vector<int64_t> y_space = tail(s.y.shape, 1);
  const bool y_fits =
      y_space == space || (y_space.size() == 4 && y_space[0] == 1 && tail(y_space, 1) == space);
  TANDEM_CHECK(y_fits,
               "'{}' has shape {} but '{}' has {}: the targets are one voxel map per sample, "
               "(N, D, H, W) or (N, 1, D, H, W) with the inputs' D, H, W.",
               s.y_path, ys, s.x_path, xs);
  for (int64_t side : space)
    TANDEM_CHECK(side % needs.divisor == 0,
                 "'{}' has shape {}: the U-Net halves the volume {} times, so D, H and W must "
                 "be multiples of {}. Crop or pad the volumes, or use fewer Config::levels.",
                 s.x_path, xs, __builtin_ctzll(static_cast<uint64_t>(needs.divisor)),
                 needs.divisor);
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Arrays in memory, read on the first batch: input float32 standardized as `normalization`
// says; targets int64 (classes) or float32 [N,1,D,H,W].
class NpySource : public Source {
 public:
  NpySource(std::string dir, ModelNeeds needs, uint64_t seed, Split train,
            std::optional<Split> test, data::Normalization normalization)
      : dir_(std::move(dir)),
        needs_(needs),
        seed_(seed),
        train_(std::move(train)),
        test_(std::move(test)),
        normalization_(std::move(normalization)) {}

  int64_t train_size() const override { return train_.size(); }
  int64_t test_size() const override { return test_ ? test_->size() : 0; }
  std::vector<int64_t> input_shape() const override { return sample_shape(train_, needs_); }
  std::string describe() const override {
    const bool measured =
        normalization_.mode == data::Normalize::kDataset && normalization_.mean.empty();
    return fmt::format("npy arrays in {} ({} training, {} test samples of shape {}); inputs {}",
                       dir_, train_size(), test_size(), data::npy_shape_text(input_shape()),
                       measured ? "standardized with the mean and deviation of all of train_x"
                                : data::describe(normalization_));
  }

  data::Normalization normalization() const override {
    load();
    return applied_;
  }

  void load() const override {
    std::call_once(once_, [this] {
      Arrays train = read(train_);
      applied_ = normalization_;
      if (applied_.mode == data::Normalize::kDataset && applied_.mean.empty()) {
        // One pair over all of train_x, summed in a fixed order (data::moments).
        const data::Moments m = data::moments(train.x);
        applied_.mean = {m.mean};
        applied_.deviation = {m.stddev};
      }
      Arrays test = test_ ? read(*test_) : Arrays{};
      train.x = standardized(train.x);
      if (test_) test.x = standardized(test.x);
      train_arrays_ = std::move(train);
      test_arrays_ = std::move(test);
    });
  }

  Batch train_batch(int64_t epoch, int64_t begin, int64_t end) const override {
    load();
    std::vector<int64_t> idx;
    {
      std::lock_guard<std::mutex> lock(order_mutex_);
      if (epoch != order_epoch_) {
        order_ = data::shuffled_indices(train_size(), seed_, epoch);
        order_epoch_ = epoch;
      }
      idx.assign(order_.begin() + begin, order_.begin() + end);
    }
    torch::Tensor rows = torch::tensor(idx, torch::kInt64);
    return {train_arrays_.x.index_select(0, rows), train_arrays_.y.index_select(0, rows)};
  }

  Batch test_batch(int64_t begin, int64_t end) const override {
    load();
    return {test_arrays_.x.slice(0, begin, end), test_arrays_.y.slice(0, begin, end)};
  }

 private:
  struct Arrays {
    torch::Tensor x, y;  // x float64 until standardized, then float32
  };

  // x (float64) as applied_ says, float32. A sample that is not a volume is one channel.
  torch::Tensor standardized(const torch::Tensor& x) const {
    if (needs_.volumes || applied_.mode != data::Normalize::kPerImage)
      return data::normalized_each(x, applied_);
    return data::normalized_each(x.reshape({x.size(0), 1, -1}), applied_).reshape(x.sizes());
  }

  // Reads and converts one split; checks the target values the loss needs.
  Arrays read(const Split& s) const {
    Arrays a;
    const int64_t n = s.size();
    std::vector<int64_t> x_shape{n};
    for (int64_t d : sample_shape(s, needs_)) x_shape.push_back(d);
    a.x = data::read_npy(s.x_path).to(torch::kFloat64).reshape(x_shape);
    torch::Tensor y = data::read_npy(s.y_path);
    if (needs_.target == Target::kClasses) {
      y = y.to(torch::kInt64);
      torch::Tensor bad = (y < 0).logical_or(y >= needs_.classes).nonzero();
      TANDEM_CHECK(bad.numel() == 0,
                   "'{}' holds the label {} at sample {}; the model has {} classes (0..{}). Give "
                   "Config::classes with one more than the largest label.",
                   s.y_path, bad.numel() ? y[bad[0][0]].item<int64_t>() : 0,
                   bad.numel() ? bad[0][0].item<int64_t>() : 0, needs_.classes, needs_.classes - 1);
      a.y = y;
      return a;
    }
    if (!needs_.volumes) {  // real targets of any shape per sample
      a.y = y.to(torch::kFloat32);
      return a;
    }
    std::vector<int64_t> y_shape = x_shape;
    y_shape[1] = 1;
    a.y = y.to(torch::kFloat32).reshape(y_shape);
    if (needs_.target == Target::kMask) {
      const torch::Tensor flat = a.y.flatten();
      const torch::Tensor bad = flat.ne(0).logical_and(flat.ne(1)).nonzero();
      const int64_t at = bad.numel() ? bad[0][0].item<int64_t>() : 0;
      TANDEM_CHECK(bad.numel() == 0,
                   "'{}' holds {} at sample {}; the Dice and cross-entropy losses need 0/1 "
                   "masks. Make a mask of the class to learn, e.g. numpy.save(path, (y > "
                   "0).astype('|u1')).",
                   s.y_path, flat[at].item<double>(), at / (flat.numel() / n));
    }
    return a;
  }

  std::string dir_;
  ModelNeeds needs_;
  uint64_t seed_;
  Split train_;
  std::optional<Split> test_;
  data::Normalization normalization_;  // as asked: never kDefault
  mutable std::once_flag once_;
  mutable data::Normalization applied_;        // with the moments measured; written under once_
  mutable Arrays train_arrays_, test_arrays_;  // written once, under once_
  mutable std::mutex order_mutex_;             // guards the epoch order cache below
  mutable int64_t order_epoch_ = -1;
  mutable std::vector<int64_t> order_;
};

}  // namespace

std::unique_ptr<Source> make_npy_source(const std::string& dir, const ModelNeeds& needs,
                                        uint64_t seed, data::Normalization normalization) {
  if (normalization.mode == data::Normalize::kDefault)
    normalization.mode = data::Normalize::kDataset;
  TANDEM_CHECK(!normalization.head,
               "npy:{} is standardized over all values; over the values > 0 is for --data mri",
               dir);
  auto split = [&](const std::string& name) {
    Split s{dir + "/" + name + "_x.npy", dir + "/" + name + "_y.npy", {}, {}};
    s.x = data::read_npy_header(s.x_path);
    s.y = data::read_npy_header(s.y_path);
    check_split(s, needs);
    return s;
  };
  Split train = split("train");
  TANDEM_CHECK(train.size() >= 1, "'{}' holds no sample (shape {}).", train.x_path,
               data::npy_shape_text(train.x.shape));
  std::optional<Split> test;
  const std::string test_x = dir + "/test_x.npy", test_y = dir + "/test_y.npy";
  TANDEM_CHECK(exists(test_x) == exists(test_y),
               "'{}' exists but '{}' does not: give both held-out files, or neither (no held-out "
               "set).",
               exists(test_x) ? test_x : test_y, exists(test_x) ? test_y : test_x);
  if (exists(test_x)) {
    test = split("test");
    TANDEM_CHECK(sample_shape(*test, needs) == sample_shape(train, needs),
                 "'{}' has shape {} but '{}' has {}: the samples must have the same shape.",
                 test->x_path, data::npy_shape_text(test->x.shape), train.x_path,
                 data::npy_shape_text(train.x.shape));
  }
  return std::make_unique<NpySource>(dir, needs, seed, std::move(train), std::move(test),
                                     std::move(normalization));
}

}  // namespace tandem::train
