// Volume data sets as training sources: shapes, disjoint held-out samples, epoch order, errors.
#include "tandem/train/volume_source.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <set>

#include "data/batching.h"
#include "error_of.h"
#include "tandem/common/check.h"
#include "tandem/data/regression.h"
#include "tandem/data/spheres.h"

namespace tandem {
namespace {

TEST(VolumeSource, SpheresShapesAndSizes) {
  auto s = train::make_volume_source("spheres", 8, 1, 3, 10, 4);
  EXPECT_EQ(s->train_size(), 10);
  EXPECT_EQ(s->test_size(), 4);
  train::Batch b = s->train_batch(0, 2, 5);
  EXPECT_EQ(b.input.sizes(), (std::vector<int64_t>{3, 1, 8, 8, 8}));
  EXPECT_EQ(b.target.sizes(), (std::vector<int64_t>{3, 1, 8, 8, 8}));
  train::Batch t = s->test_batch(0, 4);
  EXPECT_EQ(t.input.size(0), 4);
  EXPECT_NE(s->describe().find("spheres"), std::string::npos);
}

// Training sample k of an epoch is data set sample order[k]; held-out sample j is data set
// sample train_size + j, so the two never share a sample.
TEST(VolumeSource, SpheresFollowTheEpochOrderAndHoldOutTheNextIndices) {
  const int64_t n = 12;
  auto s = train::make_volume_source("spheres", 8, 1, 5, n, 3);
  data::SpheresDataset set(8, 5);
  for (int64_t epoch : {0, 1}) {
    std::vector<int64_t> order = data::shuffled_indices(n, 5, epoch);
    train::Batch b = s->train_batch(epoch, 0, n);
    for (int64_t k = 0; k < n; k += 5) {
      EXPECT_TRUE(torch::equal(b.input[k], set.sample(order[k], 1).input[0])) << epoch << " " << k;
    }
  }
  EXPECT_FALSE(torch::equal(s->train_batch(0, 0, n).input, s->train_batch(1, 0, n).input));
  train::Batch held = s->test_batch(1, 3);
  EXPECT_TRUE(torch::equal(held.input, set.sample(n + 1, 2).input));
  EXPECT_TRUE(torch::equal(held.target, set.sample(n + 1, 2).target));
}

TEST(VolumeSource, RegressionHasChannelsAndDisjointHeldOut) {
  auto s = train::make_volume_source("regression", 6, 3, 7, 5, 2);
  train::Batch b = s->train_batch(0, 0, 5);
  EXPECT_EQ(b.input.sizes(), (std::vector<int64_t>{5, 3, 6, 6, 6}));
  EXPECT_EQ(b.target.sizes(), (std::vector<int64_t>{5, 1, 6, 6, 6}));
  train::Batch t = s->test_batch(0, 2);
  EXPECT_TRUE(torch::equal(t.input, data::synthetic_regression(5, 2, 3, 6, 7).input));
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 2; ++j) EXPECT_FALSE(torch::equal(b.input[i], t.input[j]));
  }
}

TEST(VolumeSource, SameSeedSameSamples) {
  auto a = train::make_volume_source("regression", 4, 1, 9, 6, 2);
  auto b = train::make_volume_source("regression", 4, 1, 9, 6, 2);
  EXPECT_TRUE(torch::equal(a->train_batch(2, 1, 4).input, b->train_batch(2, 1, 4).input));
  auto c = train::make_volume_source("regression", 4, 1, 10, 6, 2);
  EXPECT_FALSE(torch::equal(a->train_batch(2, 1, 4).input, c->train_batch(2, 1, 4).input));
}

TEST(VolumeSource, ErrorsNameTheValueAndTheWayOut) {
  EXPECT_NE(error_of([] {
              train::make_volume_source("cubes", 8, 1, 0, 4, 1);
            }).find("unknown volume data set 'cubes'; use spheres, mri or regression"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              train::make_volume_source("spheres", 8, 2, 0, 4, 1);
            }).find("1 input channel, not 2"),
            std::string::npos);
  EXPECT_NE(error_of([] { train::make_volume_source("spheres", 0, 1, 0, 4, 1); }).find("not 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { train::make_volume_source("regression", 8, 0, 0, 4, 1); }).find("not 0"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              train::make_volume_source("regression", 8, 1, 0, 0, 1);
            }).find("at least 1 sample"),
            std::string::npos);
  EXPECT_THROW(train::make_volume_source("regression", 8, 1, 0, 4, -1), Error);
  auto s = train::make_volume_source("regression", 4, 1, 0, 4, 2);
  EXPECT_NE(error_of([&] { s->train_batch(0, 2, 5); }).find("[2, 5)"), std::string::npos);
  EXPECT_THROW(s->train_batch(0, 3, 3), Error);
  EXPECT_THROW(s->train_batch(-1, 0, 1), Error);
  EXPECT_THROW(s->test_batch(1, 3), Error);
  EXPECT_THROW(train::make_volume_source("mri", 16, 1, 0, 4, 1, "/nonexistent"), Error);
}

bool mri_files_present() {
  const std::string dir = train::kDefaultMriDir;
  return std::ifstream(dir + "/ch2.nii.gz").good() && std::ifstream(dir + "/ch2bet.nii.gz").good();
}

TEST(VolumeSource, MriCropsFromDisjointSlabs) {
  if (!mri_files_present()) {
    GTEST_SKIP() << train::kDefaultMriDir << " lacks ch2.nii.gz or ch2bet.nii.gz (apt install "
                 << "mricron-data)";
  }
  auto s = train::make_volume_source("mri", 16, 1, 2, 8, 3);
  train::Batch b = s->train_batch(0, 0, 4);
  EXPECT_EQ(b.input.sizes(), (std::vector<int64_t>{4, 1, 16, 16, 16}));
  train::Batch t = s->test_batch(0, 3);
  EXPECT_EQ(t.target.sizes(), (std::vector<int64_t>{3, 1, 16, 16, 16}));
  const double ones = t.target.sum().item<double>();
  EXPECT_GT(ones, 0.0);  // held-out crops hold brain
  EXPECT_EQ((t.target.eq(0) | t.target.eq(1)).all().item<bool>(), true);
  EXPECT_THROW(train::make_volume_source("mri", 100, 1, 2, 8, 3), Error);  // > the held-out slab
}

}  // namespace
}  // namespace tandem
