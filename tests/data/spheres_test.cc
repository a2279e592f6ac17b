#include "tandem/data/spheres.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tandem/common/check.h"

namespace tandem::data {
namespace {

TEST(Spheres, ShapesAndBinaryMasks) {
  const SpheresDataset ds(16, 1);
  VolumeBatch b = ds.sample(0, 4);
  EXPECT_EQ(b.input.sizes(), (std::vector<int64_t>{4, 1, 16, 16, 16}));
  EXPECT_EQ(b.target.sizes(), b.input.sizes());
  EXPECT_EQ(b.input.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(b.target, b.target.gt(0.5).to(torch::kFloat32)));
  for (int64_t i = 0; i < 4; ++i) {
    const double fg = b.target[i].mean().item<double>();
    EXPECT_GT(fg, 0.0) << "volume " << i << " has no object";
    EXPECT_LT(fg, 1.0) << "volume " << i << " has no background";
  }
}

TEST(Spheres, DeterministicBySeedAndIndex) {
  const SpheresDataset a(12, 7), b(12, 7), c(12, 8);
  VolumeBatch x = a.sample(5, 3);
  EXPECT_TRUE(torch::equal(x.input, b.sample(5, 3).input));
  EXPECT_TRUE(torch::equal(x.target, b.sample(5, 3).target));
  EXPECT_TRUE(torch::equal(a.sample(6, 1).input[0], x.input[1]));  // independent of the batch
  EXPECT_FALSE(torch::equal(x.target[0], x.target[1]));
  EXPECT_FALSE(torch::equal(c.sample(5, 3).target, x.target));
  // The global torch RNG is neither used nor disturbed.
  torch::manual_seed(0);
  const torch::Tensor before = torch::rand({4});
  torch::manual_seed(0);
  a.sample(0, 2);
  EXPECT_TRUE(torch::equal(torch::rand({4}), before));
}

TEST(Spheres, NoiseIsPresentAndHasTheRequestedSpread) {
  SpheresOptions quiet;
  quiet.noise_std = 0.0;
  SpheresOptions noisy;
  noisy.noise_std = 0.25;
  VolumeBatch clean = SpheresDataset(24, 3, quiet).sample(0, 2);
  VolumeBatch dirty = SpheresDataset(24, 3, noisy).sample(0, 2);
  // Same objects (the noise is drawn after them), input differs by the noise alone.
  EXPECT_TRUE(torch::equal(clean.target, dirty.target));
  torch::Tensor noise = (dirty.input - clean.input).to(torch::kFloat64);
  EXPECT_NEAR(noise.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(noise.std().item<double>(), 0.25, 0.01);
  // Without noise the input is 0 outside the objects and in [0.6, 1] inside.
  EXPECT_TRUE(torch::equal(clean.input.gt(0).to(torch::kFloat32), clean.target));
  EXPECT_GE(clean.input.masked_select(clean.target.gt(0)).min().item<float>(), 0.6f);
  EXPECT_LE(clean.input.max().item<float>(), 1.0f);
}

TEST(Spheres, AnySizeWorks) {
  for (int size : {4, 5, 33}) {
    VolumeBatch b = SpheresDataset(size, 2).sample(0, 1);
    EXPECT_EQ(b.input.size(4), size);
  }
}

TEST(Spheres, BadOptionsThrowWithValues) {
  try {
    SpheresDataset(2, 1);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size 2"), std::string::npos) << e.what();
  }
  SpheresOptions o;
  o.min_objects = 4;
  try {
    SpheresDataset(8, 1, o);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4..3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::data
