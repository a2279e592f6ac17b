// MNIST and Fashion-MNIST from their IDX files (plain or gzip).
//
// Shapes: N images, H x W pixels (28 x 28 for both data sets).
#pragma once

#include <torch/types.h>

#include <string>

namespace tandem::data {

enum class Split { kTrain, kTest };

// A labelled image data set held in memory.
struct ImageDataset {
  torch::Tensor images;  // [N,1,H,W] float32 in [0,1] (pixel / 255), or uint8 (Pixels::kBytes)
  torch::Tensor labels;  // [N] int64 in 0..9
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Where `make demo` / scripts/setup put the MNIST files, relative to the repository root.
inline constexpr const char* kDefaultMnistDir = "data/mnist";
// Where Debian's dataset-fashion-mnist package installs its files.
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// How a loader returns the pixels: float32 pixel / 255, or the files' bytes (uint8: a quarter
// of the memory; scaled_pixels() of them is kScaled's tensor, bit for bit).
enum class Pixels { kScaled, kBytes };

// Bytes [..] (uint8) as float32 pixel / 255, the loaders' kScaled values.
torch::Tensor scaled_pixels(const torch::Tensor& bytes);

// Loads an images file (IDX, ubyte, 3 dims) and a labels file (IDX, ubyte, 1 dim). Throws
// tandem::Error naming the file for an element type other than unsigned bytes (from the header,
// before the data is read), a wrong rank, a count mismatch between the two files, or a label
// outside 0..9.
ImageDataset load_image_pair(const std::string& images_path, const std::string& labels_path,
                             Pixels pixels = Pixels::kScaled);

// Loads MNIST from `dir`, which holds {train,t10k}-{images-idx3,labels-idx1}-ubyte, each
// either plain or with a `.gz` suffix. A missing file throws naming every name tried and
// how to install the data.
ImageDataset load_mnist(const std::string& dir, Split split, Pixels pixels = Pixels::kScaled);

// Loads Fashion-MNIST; the same file names and checks as load_mnist.
ImageDataset load_fashion_mnist(const std::string& dir, Split split,
                                Pixels pixels = Pixels::kScaled);
// What the headers of one split's two files say (nothing else is read): the files, the
// sample count N and the image size H x W. Missing files, element types other than unsigned
// bytes and mismatched headers throw as the loaders do.
struct ImageFiles {
  std::string images, labels;
  int64_t count = 0;
  int64_t height = 0, width = 0;
};
ImageFiles inspect_mnist(const std::string& dir, Split split);
ImageFiles inspect_fashion_mnist(const std::string& dir, Split split);

// The number of samples of a split, from the files' headers alone.
int64_t count_mnist(const std::string& dir, Split split);

inline ImageDataset load_fashion_mnist(Split split) {
  return load_fashion_mnist(kDefaultFashionMnistDir, split);
}

}  // namespace tandem::data
