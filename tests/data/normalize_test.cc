// --normalize's one code path (data/normalize.h): each mode's values, the moments over several
// images, and the words that parse and print.
#include "data/normalize.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/moments.h"
#include "tandem/common/check.h"
#include "tandem/data/mri.h"
#include "tandem/data/nifti_folder.h"

namespace tandem::data {
namespace {

// [2,3,4,5] of two channels on different scales.
torch::Tensor image() {
  torch::Tensor x = torch::arange(120, torch::kFloat64).reshape({2, 3, 4, 5});
  x[1] = x[1] * 7 + 100;
  return x;
}

TEST(Normalize, WordsParseAndPrint) {
  for (Normalize m : {Normalize::kNone, Normalize::kDataset, Normalize::kPerImage})
    EXPECT_EQ(parse_normalize(normalize_name(m)), m);
  EXPECT_THROW(parse_normalize("zscore"), Error);
  EXPECT_EQ(describe({Normalize::kNone}), "not standardized");
  EXPECT_EQ(describe({Normalize::kPerImage, true}),
            "each image standardized per channel over its voxels > 0 (the head)");
  EXPECT_EQ(describe({Normalize::kDataset, false, {0.5}, {2.0}}),
            "standardized with the training inputs' mean 0.5 and deviation 2");
}

TEST(Normalize, NoneKeepsTheValues) {
  EXPECT_TRUE(torch::equal(normalized(image(), {Normalize::kNone}), image().to(torch::kFloat32)));
}

TEST(Normalize, PerImageIsEachChannelByItsOwnMoments) {
  const torch::Tensor x = normalized(image(), {Normalize::kPerImage});
  EXPECT_TRUE(torch::equal(x, standardized(image())));
  for (int64_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(x[c].mean().item<double>(), 0.0, 1e-6);
    EXPECT_NEAR(x[c].std().item<double>(), 1.0, 1e-6);
  }
  // Over the values > 0: the zeros of the background do not count.
  torch::Tensor head = image();
  head.narrow(1, 0, 1).zero_();
  EXPECT_TRUE(torch::equal(normalized(head, {Normalize::kPerImage, true}, "scan"),
                           head_standardized(head, "scan")));
  EXPECT_FALSE(torch::equal(normalized(head, {Normalize::kPerImage, true}, "scan"),
                            normalized(head, {Normalize::kPerImage})));
}

TEST(Normalize, DatasetAppliesTheGivenMomentsPerChannelOrForAll) {
  const Normalization per_channel{Normalize::kDataset, false, {1.0, 2.0}, {4.0, 0.0}};
  const torch::Tensor x = normalized(image(), per_channel);
  EXPECT_TRUE(torch::equal(x[0], ((image()[0] - 1.0) / 4.0).to(torch::kFloat32)));
  EXPECT_TRUE(torch::equal(x[1], (image()[1] - 2.0).to(torch::kFloat32)));  // deviation 0: 1
  const Normalization one{Normalize::kDataset, false, {3.0}, {2.0}};
  EXPECT_TRUE(torch::equal(normalized(image(), one), ((image() - 3.0) / 2.0).to(torch::kFloat32)));
  EXPECT_THROW(normalized(image(), {Normalize::kDataset, false, {1.0, 2.0, 3.0}, {1.0, 1.0, 1.0}}),
               Error);
}

// MNIST's pixels were always standardized in float32; npy's arrays in double. Both stay so.
TEST(Normalize, DatasetArithmeticIsFloat32OnlyWhereAsked) {
  const torch::Tensor x = torch::rand({50}, torch::kFloat32);
  Normalization n{Normalize::kDataset, false, {0.1306604762738429}, {0.3081078038564622}};
  const torch::Tensor in_double =
      ((x.to(torch::kFloat64) - n.mean[0]) / n.deviation[0]).to(torch::kFloat32);
  EXPECT_TRUE(torch::equal(normalized(x, n), in_double));
  n.in_float32 = true;
  EXPECT_TRUE(torch::equal(normalized(x, n), (x - n.mean[0]) / n.deviation[0]));
}

TEST(Normalize, EachSampleOfABatch) {
  const torch::Tensor batch = torch::stack({image(), image() * 3 - 5});
  const torch::Tensor x = normalized_each(batch, {Normalize::kPerImage});
  EXPECT_TRUE(torch::equal(x[0], standardized(batch[0])));
  EXPECT_TRUE(torch::equal(x[1], standardized(batch[1])));
  const Normalization per_channel{Normalize::kDataset, false, {1.0, 2.0}, {4.0, 8.0}};
  EXPECT_TRUE(
      torch::equal(normalized_each(batch, per_channel)[1], normalized(batch[1], per_channel)));
}

TEST(Normalize, DatasetMomentsArePerChannelOverAllImagesInOrder) {
  const torch::Tensor a = image(), b = image() * 0.5 + 3;
  const Normalization n = dataset_moments({a, b});
  ASSERT_EQ(n.mean.size(), 2u);
  for (int64_t c = 0; c < 2; ++c) {
    const Moments m = moments(torch::cat({a[c].flatten(), b[c].flatten()}));
    EXPECT_EQ(n.mean[c], m.mean);
    EXPECT_EQ(n.deviation[c], m.stddev);
  }
}

TEST(Moments, OfSeveralPartsAreThoseOfTheirConcatenation) {
  const torch::Tensor a = torch::rand({17}), b = torch::rand({3, 5}, torch::kFloat64);
  const Moments parts = moments(std::vector<torch::Tensor>{a, b});
  const Moments whole = moments(torch::cat({a.to(torch::kFloat64), b.flatten()}));
  EXPECT_EQ(parts.mean, whole.mean);
  EXPECT_EQ(parts.stddev, whole.stddev);
}

}  // namespace
}  // namespace tandem::data
