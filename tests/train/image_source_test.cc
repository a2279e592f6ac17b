// Image sources read their files' headers when made and the images only when a batch is asked
// for, so a process that needs no data reads none.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "data/file_bytes.h"
#include "error_of.h"
#include "scratch.h"
#include "tandem/common/check.h"
#include "tandem/data/idx.h"
#include "tandem/train/source.h"

namespace tandem {
namespace {

// Images of `side` x `side` pixels (the test images `test_side` when given).
std::string mnist_dir(const std::string& name, int64_t train, int64_t test, int64_t side = 2,
                      int64_t test_side = 0) {
  const std::string dir = testing::scratch_path("tandem_image_source_", name);
  ::mkdir(dir.c_str(), 0755);
  for (auto [prefix, n] : {std::pair<std::string, int64_t>{"train", train}, {"t10k", test}}) {
    const int64_t s = prefix == "t10k" && test_side > 0 ? test_side : side;
    data::write_idx(dir + "/" + prefix + "-images-idx3-ubyte",
                    torch::arange(n * s * s).remainder(251).view({n, s, s}).to(torch::kUInt8));
    data::write_idx(dir + "/" + prefix + "-labels-idx1-ubyte",
                    torch::arange(n).remainder(10).to(torch::kUInt8));
  }
  return dir;
}

TEST(ImageSource, SizesComeFromTheHeadersAndTheImagesOnlyWithABatch) {
  const std::string dir = mnist_dir("lazy", 6, 3);
  const std::string images = dir + "/train-images-idx3-ubyte";
  std::vector<uint8_t> bytes = data::read_file_bytes(images);
  bytes.resize(16 + 7);  // header intact, images cut short
  data::write_file_bytes(images, bytes, false);
  auto source = train::make_image_source("mnist", dir, 0);
  EXPECT_EQ(source->train_size(), 6);
  EXPECT_EQ(source->test_size(), 3);
  EXPECT_NE(source->describe().find("6 training, 3 test images"), std::string::npos);
  try {
    source->train_batch(0, 0, 2);
    ADD_FAILURE() << "a truncated images file was read without error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST(ImageSource, BatchesAreStandardizedWithTheTrainingSetsStatistics) {
  const std::string dir = mnist_dir("batches", 8, 4);
  auto source = train::make_image_source("mnist", dir, 0);
  const torch::Tensor all = source->train_batch(0, 0, 8).input;
  EXPECT_EQ(all.sizes(), (std::vector<int64_t>{8, 1, 2, 2}));
  EXPECT_NEAR(all.mean().item<double>(), 0.0, 1e-5);
  EXPECT_NEAR(all.std().item<double>(), 1.0, 1e-5);
  const train::Batch test = source->test_batch(1, 3);
  EXPECT_EQ(test.target.sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(test.target[0].item<int64_t>(), 1);
}

// Image sizes are checked from the headers when the source is made: between the two splits, and
// against the inputs of the model. Found later, they would be LibTorch's message about a
// product, at the first step or after all of the training, in the evaluation.
TEST(ImageSource, ImageSizesAreCheckedAgainstEachOtherAndTheModel) {
  const std::string split = mnist_dir("split_sizes", 6, 3, 28, 14);
  EXPECT_EQ(error_of([&] { train::make_image_source("mnist", split, 0); }),
            "the training images '" + split +
                "/train-images-idx3-ubyte' are 28x28 but the test "
                "images '" +
                split +
                "/t10k-images-idx3-ubyte' are 14x14: both splits of a data set "
                "must have one image size");
  const std::string small = mnist_dir("model_size", 6, 3, 14);
  // 14 x 14 images in both splits are a data set of their own: the model takes 196 inputs.
  EXPECT_EQ(train::make_image_source("mnist", small, 0)->input_shape(),
            (std::vector<int64_t>{1, 14, 14}));
  // float32 pixels and an int64 label.
  EXPECT_EQ(train::make_image_source("mnist", small, 0)->sample_bytes(), 14 * 14 * 4 + 8);
}

}  // namespace
}  // namespace tandem
