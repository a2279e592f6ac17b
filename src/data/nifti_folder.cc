#include "tandem/data/nifti_folder.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

#include "data/moments.h"
#include "data/normalize.h"
#include "data/rng.h"
#include "tandem/common/check.h"
#include "tandem/data/nifti.h"

namespace tandem::data {
namespace {
namespace fs = std::filesystem;

constexpr uint64_t kNiftiTrainStream = 0x4e494954ULL;    // "NIIT"
constexpr uint64_t kNiftiHeldOutStream = 0x4e494948ULL;  // "NIIH"

bool is_nifti_name(const std::string& name) {
  auto ends = [&](const std::string& suffix) {
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".nii") || ends(".nii.gz");
}

// The NIfTI file names in `folder`, sorted.
std::set<std::string> nifti_names(const fs::path& folder, const std::string& dir) {
  std::error_code error;
  TANDEM_CHECK(fs::is_directory(folder, error),
               "the NIfTI folder {} needs the folder '{}' (images/ and labels/ with the same file "
               "names, .nii or .nii.gz).",
               dir, folder.string());
  std::set<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(folder)) {
    const std::string name = e.path().filename().string();
    if (is_nifti_name(name) && !e.is_directory()) names.insert(name);
  }
  return names;
}

// The first few of `values`, for messages.
std::string some(const torch::Tensor& values) {
  const int64_t n = values.numel();
  std::vector<double> shown;
  for (int64_t i = 0; i < std::min<int64_t>(n, 6); ++i) shown.push_back(values[i].item<double>());
  return fmt::format("{}{}", fmt::join(shown, ", "), n > 6 ? ", ..." : "");
}

}  // namespace

torch::Tensor standardized(const torch::Tensor& image) {
  torch::Tensor x = image.to(torch::kFloat64);
  const int64_t channels = x.size(0);
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);  // [C,1,...]: per channel
  shape[0] = channels;
  torch::Tensor mean = torch::empty(shape, torch::kFloat64);
  torch::Tensor std = torch::empty(shape, torch::kFloat64);
  for (int64_t c = 0; c < channels; ++c) {
    const Moments m = moments(x[c]);
    mean[c].fill_(m.mean);
    std[c].fill_(m.stddev > 0 ? m.stddev : 1.0);
  }
  return ((x - mean) / std).to(torch::kFloat32);
}

std::vector<NiftiPair> list_nifti_pairs(const std::string& dir) {
  const fs::path root(dir);
  const std::set<std::string> images = nifti_names(root / "images", dir);
  const std::set<std::string> labels = nifti_names(root / "labels", dir);
  TANDEM_CHECK(!images.empty(), "'{}' holds no .nii or .nii.gz file.", (root / "images").string());
  for (const std::string& name : images)
    TANDEM_CHECK(labels.count(name),
                 "the image '{}' has no label '{}': every image needs a label "
                 "file of the same name.",
                 (root / "images" / name).string(), (root / "labels" / name).string());
  for (const std::string& name : labels)
    TANDEM_CHECK(images.count(name),
                 "the label '{}' has no image '{}': every label needs an "
                 "image file of the same name.",
                 (root / "labels" / name).string(), (root / "images" / name).string());
  std::vector<NiftiPair> pairs;
  for (const std::string& name : images) {
    NiftiPair p{name, (root / "images" / name).string(), (root / "labels" / name).string(), {}};
    p.shape = read_nifti_shape(p.image);
    const std::array<int64_t, 4> label = read_nifti_shape(p.label);
    TANDEM_CHECK(
        label[0] == 1 && label[1] == p.shape[1] && label[2] == p.shape[2] && label[3] == p.shape[3],
        "the label '{}' has shape [{}] [C,Z,Y,X] but its image '{}' has [{}]: a label "
        "is one 3D volume of the image's [Z,Y,X].",
        p.label, fmt::join(label, ", "), p.image, fmt::join(p.shape, ", "));
    if (!pairs.empty())
      TANDEM_CHECK(p.shape[0] == pairs.front().shape[0],
                   "the image '{}' has {} channels but '{}' has {}: every image needs the same "
                   "channel count (the model's input channels).",
                   p.image, p.shape[0], pairs.front().image, pairs.front().shape[0]);
    pairs.push_back(std::move(p));
  }
  return pairs;
}

NiftiFolder::NiftiFolder(const std::string& dir, NiftiFolderOptions options,
                         Normalization normalization)
    : pairs_(list_nifti_pairs(dir)), options_(options), asked_(std::move(normalization)) {
  const int64_t files = static_cast<int64_t>(pairs_.size());
  TANDEM_CHECK(options.test_files >= 0 && options.test_files < files,
               "NiftiFolderOptions::test_files = {} leaves no file of the {} in '{}' for training; "
               "use 0..{}.",
               options.test_files, files, dir, files - 1);
  TANDEM_CHECK(!asked_.head,
               "'{}': NIfTI images are standardized over all their voxels; over the voxels > 0 is "
               "for --data mri",
               dir);
  int64_t largest = std::numeric_limits<int64_t>::max();
  for (const NiftiPair& p : pairs_)
    largest = std::min({largest, p.shape[1], p.shape[2], p.shape[3]});
  for (const NiftiPair& p : pairs_)
    TANDEM_CHECK(
        options.crop >= 1 && options.crop <= std::min({p.shape[1], p.shape[2], p.shape[3]}),
        "a crop of {}^3 does not fit the image '{}' of shape [{}] [C,Z,Y,X]; use "
        "NiftiFolderOptions::crop = {} or less.",
        options.crop, p.image, fmt::join(p.shape, ", "), largest);
}

void NiftiFolder::load() const {
  std::call_once(loaded_, [this] {
    std::vector<torch::Tensor> images, labels;
    for (const NiftiPair& p : pairs_) {
      Volume image = read_nifti(p.image);
      Volume label = read_nifti(p.label);
      // The headers were checked at construction; a file changed since is caught here.
      TANDEM_CHECK(image.data.sizes() == torch::IntArrayRef(p.shape) && label.data.size(0) == 1 &&
                       label.data.sizes().slice(1) == image.data.sizes().slice(1),
                   "'{}' or '{}' changed while it was read: shapes {} and {}, the headers said "
                   "[{}].",
                   p.image, p.label, image.data.sizes(), label.data.sizes(),
                   fmt::join(p.shape, ", "));
      if (options_.labels == LabelKind::kMask) {
        torch::Tensor other = std::get<0>(torch::unique_consecutive(std::get<0>(torch::sort(
            label.data.masked_select(label.data.ne(0).logical_and(label.data.ne(1)))))));
        TANDEM_CHECK(other.numel() == 0,
                     "the label '{}' holds values other than 0 and 1 ({}): a label is a 0/1 "
                     "mask for the Dice and cross-entropy losses, and tandem does not merge "
                     "classes by itself. Make a mask of the class to learn, e.g. foreground = "
                     "label > 0 (`fslmaths in -bin out`).",
                     p.label, some(other));
      }
      images.push_back(image.data);
      labels.push_back(label.data);
    }
    normalization_ = asked_;
    if (normalization_.mode == Normalize::kDefault) normalization_.mode = Normalize::kPerImage;
    if (normalization_.mode == Normalize::kDataset && normalization_.mean.empty())
      normalization_ = dataset_moments(
          {images.begin(), images.begin() + static_cast<std::ptrdiff_t>(train_files())});
    for (size_t i = 0; i < images.size(); ++i)
      images[i] = normalized(images[i], normalization_, pairs_[i].image);
    images_ = std::move(images);
    labels_ = std::move(labels);
  });
}

Normalization NiftiFolder::normalization() const {
  load();
  return normalization_;
}

VolumeBatch NiftiFolder::sample(int64_t first, int count, Subset subset) const {
  const bool train = subset == Subset::kTrain;
  TANDEM_CHECK(first >= 0 && count >= 1,
               "NiftiFolder::sample: first {} must be >= 0 and count "
               "{} >= 1.",
               first, count);
  TANDEM_CHECK(train || options_.test_files > 0,
               "NiftiFolder: no file is held out (NiftiFolderOptions::test_files = 0), so there "
               "are no held-out "
               "crops.");
  load();
  const int64_t s = options_.crop;
  VolumeBatch out;
  out.input = torch::empty({count, channels(), s, s, s}, torch::kFloat32);
  out.target = torch::empty({count, 1, s, s, s}, torch::kFloat32);
  for (int b = 0; b < count; ++b) {
    const int64_t index = first + b;
    SampleRng rng(stream_seed(options_.seed, train ? kNiftiTrainStream : kNiftiHeldOutStream,
                              static_cast<uint64_t>(index)));
    const int64_t file =
        train ? rng.between(0, train_files() - 1) : train_files() + index % options_.test_files;
    const std::array<int64_t, 4>& shape = pairs_[file].shape;
    int64_t origin[3];
    for (int d = 0; d < 3; ++d) origin[d] = rng.between(0, shape[d + 1] - s);
    auto cut = [&](const torch::Tensor& v) {
      return v.slice(1, origin[0], origin[0] + s)
          .slice(2, origin[1], origin[1] + s)
          .slice(3, origin[2], origin[2] + s);
    };
    out.input[b].copy_(cut(images_[file]));
    out.target[b].copy_(cut(labels_[file]));
  }
  return out;
}

}  // namespace tandem::data
