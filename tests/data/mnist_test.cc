#include "tandem/data/mnist.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "data/file_bytes.h"
#include "expect_error.h"
#include "scratch.h"
#include "tandem/common/check.h"
#include "tandem/data/idx.h"

namespace tandem::data {
namespace {

// A fresh empty folder per test.
std::string temp_dir(const std::string& name) {
  const std::string dir = testing::scratch_path("tandem_mnist_", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

// images [n,4,3] with pixel (i,y,x) = 10*i + 3*y + x; labels i % 10.
void write_split(const std::string& dir, const std::string& prefix, int64_t n, bool gzip,
                 int64_t label_count = -1) {
  const std::string suffix = gzip ? ".gz" : "";
  torch::Tensor i = torch::arange(n).view({n, 1, 1});
  torch::Tensor y = torch::arange(4).view({1, 4, 1});
  torch::Tensor x = torch::arange(3).view({1, 1, 3});
  write_idx(dir + "/" + prefix + "-images-idx3-ubyte" + suffix,
            (10 * i + 3 * y + x).to(torch::kUInt8), gzip);
  if (label_count < 0) label_count = n;
  write_idx(dir + "/" + prefix + "-labels-idx1-ubyte" + suffix,
            torch::arange(label_count).remainder(10).to(torch::kUInt8), gzip);
}

TEST(Mnist, CountsFromTheHeadersWithoutReadingTheImages) {
  const std::string dir = temp_dir("count");
  write_split(dir, "train", 6, true);
  write_split(dir, "t10k", 2, false);
  // Images cut short after their header: counting still works, loading does not.
  const std::string images = dir + "/train-images-idx3-ubyte.gz";
  std::vector<uint8_t> bytes = read_file_bytes(images);
  bytes.resize(16 + 5);
  write_file_bytes(images, bytes, true);
  EXPECT_EQ(count_mnist(dir, Split::kTrain), 6);
  EXPECT_EQ(count_mnist(dir, Split::kTest), 2);
  expect_error([&] { load_mnist(dir, Split::kTrain); }, {images, "truncated"});
  // Headers that disagree, and missing files, are refused by the count too.
  write_split(dir, "t10k", 2, false, /*label_count=*/3);
  expect_error([&] { count_mnist(dir, Split::kTest); }, {"t10k-labels-idx1-ubyte", "same N"});
  expect_error([&] { count_mnist(temp_dir("count_empty"), Split::kTrain); },
               {"MNIST training images not found"});
}

// A file whose header says float (or any type but unsigned bytes) is refused by its type, from
// the header, when counting and when loading; read as bytes it would only seem truncated.
TEST(Mnist, ElementsOtherThanUnsignedBytesAreRefusedByTheirType) {
  const std::string dir = temp_dir("float");
  write_split(dir, "train", 6, false);
  const std::string images = dir + "/train-images-idx3-ubyte";
  std::vector<uint8_t> bytes = read_file_bytes(images);
  bytes[2] = 0x0D;  // float32, with the bytes of a ubyte file behind it
  write_file_bytes(images, bytes, false);
  const std::string message = "'" + images +
                              "' holds IDX elements of type 32-bit floats (0x0d), which image "
                              "data sets do not support: image and label files must hold "
                              "unsigned bytes (0x08), as MNIST's do.";
  for (const auto& f : std::vector<std::function<void()>>{
           [&] { count_mnist(dir, Split::kTrain); }, [&] { load_mnist(dir, Split::kTrain); },
           [&] { load_image_pair(images, dir + "/train-labels-idx1-ubyte"); }}) {
    try {
      f();
      ADD_FAILURE() << "a float images file was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
  const ImageFiles test = [&] {
    write_split(dir, "t10k", 2, true);
    return inspect_mnist(dir, Split::kTest);
  }();
  EXPECT_EQ(test.images, dir + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(test.count, 2);
  EXPECT_EQ(test.height, 4);
  EXPECT_EQ(test.width, 3);
}

TEST(Mnist, LoadsPlainFiles) {
  const std::string dir = temp_dir("plain");
  write_split(dir, "train", 5, false);
  ImageDataset ds = load_mnist(dir, Split::kTrain);
  ASSERT_EQ(ds.size(), 5);
  EXPECT_EQ(ds.images.sizes(), (std::vector<int64_t>{5, 1, 4, 3}));
  EXPECT_EQ(ds.images.scalar_type(), torch::kFloat32);
  EXPECT_EQ(ds.labels.scalar_type(), torch::kInt64);
  EXPECT_FLOAT_EQ(ds.images[2][0][1][2].item<float>(), (20 + 3 + 2) / 255.0f);
  EXPECT_EQ(ds.labels[3].item<int64_t>(), 3);
}

TEST(Mnist, LoadsGzipFilesForTestSplit) {
  const std::string dir = temp_dir("gzip");
  write_split(dir, "t10k", 12, true);
  ImageDataset ds = load_mnist(dir, Split::kTest);
  ASSERT_EQ(ds.size(), 12);
  EXPECT_EQ(ds.labels[11].item<int64_t>(), 1);
  EXPECT_FLOAT_EQ(ds.images[11][0][3][0].item<float>(), (110 + 9) / 255.0f);
}

TEST(Mnist, MissingFileNamesTriedPathsAndHowToInstall) {
  const std::string dir = temp_dir("empty");
  expect_error([&] { load_mnist(dir, Split::kTrain); },
               {"MNIST training images not found", dir + "/train-images-idx3-ubyte'",
                dir + "/train-images-idx3-ubyte.gz'", "make demo", "scripts/setup"});
  write_split(dir, "train", 3, false);
  ::unlink((dir + "/train-labels-idx1-ubyte").c_str());
  expect_error([&] { load_mnist(dir, Split::kTrain); },
               {"training labels not found", dir + "/train-labels-idx1-ubyte.gz'"});
  expect_error([&] { load_fashion_mnist(dir, Split::kTest); },
               {"Fashion-MNIST test images not found", "t10k-images-idx3-ubyte"});
}

TEST(Mnist, CountMismatchNamesBothFiles) {
  const std::string dir = temp_dir("mismatch");
  write_split(dir, "train", 5, false, /*label_count=*/4);
  expect_error(
      [&] { load_mnist(dir, Split::kTrain); },
      {dir + "/train-images-idx3-ubyte", "5 images", dir + "/train-labels-idx1-ubyte", "4 labels"});
}

TEST(Mnist, LabelOutOfRangeNamesValueAndIndex) {
  const std::string dir = temp_dir("badlabel");
  write_split(dir, "train", 4, false);
  write_idx(dir + "/train-labels-idx1-ubyte", torch::tensor({1, 2, 10, 3}, torch::kUInt8));
  expect_error([&] { load_mnist(dir, Split::kTrain); },
               {dir + "/train-labels-idx1-ubyte", "label 10 at index 2", "0..9"});
}

TEST(Mnist, BadMagicAndTruncationNameTheFile) {
  const std::string dir = temp_dir("corrupt");
  write_split(dir, "train", 4, false);
  const std::string images = dir + "/train-images-idx3-ubyte";
  std::vector<uint8_t> bytes = read_file_bytes(images);
  bytes.resize(bytes.size() - 1);
  write_file_bytes(images, bytes, false);
  expect_error([&] { load_mnist(dir, Split::kTrain); }, {images, "truncated"});
  bytes[0] = 0x1;
  write_file_bytes(images, bytes, false);
  expect_error([&] { load_mnist(dir, Split::kTrain); }, {images, "is not an IDX file"});
}

TEST(Mnist, WrongRankOrTypeRejected) {
  const std::string dir = temp_dir("rank");
  write_split(dir, "train", 4, false);
  write_idx(dir + "/train-images-idx3-ubyte", torch::zeros({4, 12}, torch::kUInt8));
  expect_error([&] { load_mnist(dir, Split::kTrain); }, {"not an images file", "[4, 12]"});
  write_split(dir, "train", 4, false);
  write_idx(dir + "/train-labels-idx1-ubyte", torch::zeros({4}, torch::kInt32));
  expect_error([&] { load_mnist(dir, Split::kTrain); },
               {"train-labels-idx1-ubyte", "type 32-bit integers (0x0c)"});
}

// The repository's data/mnist, found from this source file's path; TANDEM_MNIST_DIR overrides.
std::string real_mnist_dir() {
  if (const char* env = std::getenv("TANDEM_MNIST_DIR")) return env;
  std::string file = __FILE__;  // <root>/tests/data/mnist_test.cc
  for (int up = 0; up < 3; ++up) file = file.substr(0, file.find_last_of('/'));
  return file + "/" + kDefaultMnistDir;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(Mnist, RealFilesIfInstalled) {
  const std::string dir = real_mnist_dir();
  if (!exists(dir + "/train-images-idx3-ubyte") && !exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "MNIST is not installed in " << dir
                 << " (run scripts/setup or `make demo`, or set TANDEM_MNIST_DIR)";
  ImageDataset train = load_mnist(dir, Split::kTrain);
  ImageDataset test = load_mnist(dir, Split::kTest);
  EXPECT_EQ(train.images.sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.labels[0].item<int64_t>(), 5);
  EXPECT_EQ(test.labels[0].item<int64_t>(), 7);
  EXPECT_EQ(train.images.max().item<float>(), 1.0f);
  EXPECT_EQ(train.images.min().item<float>(), 0.0f);
  // Kept as bytes: the same pixels once scaled, bit for bit.
  const ImageDataset bytes = load_mnist(dir, Split::kTest, Pixels::kBytes);
  EXPECT_EQ(bytes.images.scalar_type(), torch::kUInt8);
  EXPECT_TRUE(torch::equal(scaled_pixels(bytes.images), test.images));
  EXPECT_TRUE(torch::equal(bytes.labels, test.labels));
}

TEST(FashionMnist, RealFilesIfInstalled) {
  const std::string dir = kDefaultFashionMnistDir;
  if (!exists(dir + "/train-images-idx3-ubyte.gz") && !exists(dir + "/train-images-idx3-ubyte"))
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << dir
                 << " (apt install dataset-fashion-mnist, or run scripts/setup)";
  ImageDataset train = load_fashion_mnist(Split::kTrain);
  ImageDataset test = load_fashion_mnist(Split::kTest);
  EXPECT_EQ(train.images.sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.labels[0].item<int64_t>(), 9);  // an ankle boot
  // Balanced classes: 6000 training images each.
  EXPECT_TRUE(torch::equal(torch::bincount(train.labels), torch::full({10}, 6000, torch::kInt64)));
}

}  // namespace
}  // namespace tandem::data
