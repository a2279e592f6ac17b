// The trainer refuses, when it is made and so before any step, data that does not fit the model:
// found at the first step (or, for the held-out set, after all of the training) it would be
// LibTorch's message about a matrix product.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <tuple>

#include "error_of.h"
#include "scratch.h"
#include "tandem/common/check.h"
#include "tandem/data/idx.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/train/trainer.h"

namespace tandem {
namespace {

// MNIST's four files with `side` x `side` training images and `test_side` x `test_side` test
// images.
std::string image_dir(const std::string& name, int64_t side, int64_t test_side) {
  const std::string dir = testing::scratch_path("tandem_trainer_checks_", name);
  ::mkdir(dir.c_str(), 0755);
  for (auto [prefix, n, s] :
       {std::tuple<std::string, int64_t, int64_t>{"train", 8, side}, {"t10k", 4, test_side}}) {
    data::write_idx(dir + "/" + prefix + "-images-idx3-ubyte",
                    torch::arange(n * s * s).remainder(251).view({n, s, s}).to(torch::kUInt8));
    data::write_idx(dir + "/" + prefix + "-labels-idx1-ubyte",
                    torch::arange(n).remainder(10).to(torch::kUInt8));
  }
  return dir;
}

train::Config small_run(const std::string& data_dir) {
  train::Config c;
  c.data_dir = data_dir;
  c.devices = "1";
  c.width = 8;
  c.blocks = 0;
  c.batch = 4;
  c.microbatches = 1;
  c.eval_batch = 4;
  c.steps = 1;
  return c;
}

// The model takes its inputs from the images: 14 x 14 in both splits trains an mlp of 196
// inputs; images whose splits differ are refused when the trainer is made, not at the evaluation
// after all of the training with LibTorch's message about a product of mismatched shapes.
TEST(TrainerChecks, ImagesOfTwoSizesAreRefusedWhenItIsMade) {
  const std::string small = image_dir("small", 14, 14);
  EXPECT_EQ(error_of([&] { train::Trainer(small_run(small)).run(); }), "");
  const std::string mixed = image_dir("mixed", 28, 14);
  EXPECT_NE(
      error_of([&] {
        train::Trainer t(small_run(mixed));
      }).find("are 28x28 but the test images '" + mixed + "/t10k-images-idx3-ubyte' are 14x14"),
      std::string::npos);
  const std::string right = image_dir("right", 28, 28);
  EXPECT_EQ(error_of([&] { train::Trainer(small_run(right)).run(); }), "");
}

// Damaged samples (images cut short after an intact header) are found when the trainer is made,
// like the headers: an input file that is wrong, before any work.
TEST(TrainerChecks, DamagedImagesAreFoundWhenItIsMade) {
  const std::string dir = image_dir("truncated", 28, 28);
  const std::string images = dir + "/t10k-images-idx3-ubyte";
  std::filesystem::resize_file(images, 16 + 100);
  EXPECT_NE(
      error_of([&] { train::Trainer t(small_run(dir)); }).find("'" + images + "' is truncated"),
      std::string::npos);
}

// Samples that cannot fit the machine are refused from their sizes before any is made:
// memory::DoesNotFit (exit status 3 on the command line), not LibTorch's allocator failing.
TEST(TrainerChecks, AVolumeBeyondTheMachinesMemoryIsRefusedBeforeItIsAllocated) {
  const double memory =
      static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (memory >= 1024.0 * 1024 * 1024 * 1024) GTEST_SKIP() << "this machine has 1 TiB or more";
  train::Config c;
  c.model = "conv3d-stack";
  c.data = "regression";
  c.volume = 4096;  // one sample: 2 x 4096^3 float32 = 512 GiB
  c.convs = 2;
  c.filters = 4;
  c.devices = "1";
  c.batch = 2;
  c.microbatches = 2;
  c.steps = 1;
  try {
    train::Trainer t(c);
    ADD_FAILURE() << "a 4096^3 volume was accepted";
  } catch (const memory::DoesNotFit& e) {
    EXPECT_NE(
        std::string(e.what()).find("Config::volume = 4096 does not fit: one batch of 2 samples "
                                   "takes 1.0 TiB"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem
