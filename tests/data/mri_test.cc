#include "tandem/data/mri.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "expect_error.h"
#include "scratch.h"
#include "tandem/common/check.h"
#include "tandem/data/nifti.h"

namespace tandem::data {
namespace {

// A small head phantom, [Z,Y,X] = [20,24,30]: a box "head" of intensity 1 + x/100 on a zero
// background, with an ellipsoid "brain" 2 brighter; the mask file holds the brain only.
struct Phantom {
  std::string image, mask;
};

const Phantom& phantom() {
  static const Phantom p = [] {
    torch::Tensor z = torch::arange(20, torch::kFloat32).view({20, 1, 1});
    torch::Tensor y = torch::arange(24, torch::kFloat32).view({1, 24, 1});
    torch::Tensor x = torch::arange(30, torch::kFloat32).view({1, 1, 30});
    torch::Tensor head = (z >= 2) * (z < 18) * (y >= 2) * (y < 22) * (x >= 2) * (x < 28);
    torch::Tensor brain =
        ((z - 10) / 6).pow(2) + ((y - 12) / 8).pow(2) + ((x - 15) / 11).pow(2) <= 1;
    Volume image, mask;
    image.data = head.to(torch::kFloat32) * (1 + x / 100) + 2 * brain.to(torch::kFloat32);
    mask.data = image.data * brain;
    image.spacing = mask.spacing = {1, 1, 1};
    Phantom out{testing::scratch_path("tandem_mri_", "image.nii.gz"),
                testing::scratch_path("tandem_mri_", "mask.nii")};
    write_nifti(out.image, image);
    write_nifti(out.mask, mask);
    return out;
  }();
  return p;
}

MriDataset make(int crop, uint64_t seed, MriOptions options = {}) {
  return MriDataset(phantom().image, phantom().mask, crop, seed, options);
}

TEST(Mri, ShapesAndBinaryTarget) {
  VolumeBatch b = make(8, 1).sample(0, 3);
  EXPECT_EQ(b.input.sizes(), (std::vector<int64_t>{3, 1, 8, 8, 8}));
  EXPECT_EQ(b.target.sizes(), b.input.sizes());
  EXPECT_TRUE(torch::equal(b.target, b.target.gt(0.5).to(torch::kFloat32)));
}

TEST(Mri, NormalizedOverTheHead) {
  const MriDataset ds = make(8, 1);
  // The head is where the raw image is > 0; the background maps below every head voxel.
  torch::Tensor head = ds.image().gt(ds.image().min());
  torch::Tensor values = ds.image().masked_select(head).to(torch::kFloat64);
  EXPECT_NEAR(values.mean().item<double>(), 0.0, 1e-5);
  EXPECT_NEAR(values.std().item<double>(), 1.0, 1e-5);
}

TEST(Mri, DeterministicBySeedAndIndex) {
  const MriDataset a = make(8, 5), b = make(8, 5), other_seed = make(8, 6);
  VolumeBatch x = a.sample(10, 4), y = b.sample(10, 4);
  EXPECT_TRUE(torch::equal(x.input, y.input));
  EXPECT_TRUE(torch::equal(x.target, y.target));
  // Crop i does not depend on the batch it is drawn in.
  EXPECT_TRUE(torch::equal(a.sample(12, 2).input, x.input.slice(0, 2, 4)));
  // Different indices and seeds give different crops.
  EXPECT_FALSE(torch::equal(x.input[0], x.input[1]));
  EXPECT_FALSE(torch::equal(other_seed.sample(10, 4).input, x.input));
}

TEST(Mri, FlipsAreTheSameForInputAndTarget) {
  const MriDataset ds = make(8, 3);
  // The phantom's brain is exactly the set of voxels above a threshold, flipped or not.
  const float inside_min = ds.image().masked_select(ds.mask().gt(0)).min().item<float>();
  const float outside_max = ds.image().masked_select(ds.mask().eq(0)).max().item<float>();
  ASSERT_LT(outside_max, inside_min);
  const float threshold = (inside_min + outside_max) / 2;
  VolumeBatch b = ds.sample(0, 32);
  EXPECT_TRUE(torch::equal(b.input.gt(threshold).to(torch::kFloat32), b.target));
  // Each axis is flipped for some crops and not for others, and the crops are exact.
  int flipped[3] = {0, 0, 0};
  for (int64_t i = 0; i < 32; ++i) {
    const MriDataset::Placement p = ds.placement(i, Subset::kTrain);
    std::vector<int64_t> dims;
    for (int d = 0; d < 3; ++d)
      if (p.flipped[d]) dims.push_back(d), ++flipped[d];
    torch::Tensor crop = ds.image()
                             .slice(0, p.origin[0], p.origin[0] + 8)
                             .slice(1, p.origin[1], p.origin[1] + 8)
                             .slice(2, p.origin[2], p.origin[2] + 8);
    if (!dims.empty()) crop = crop.flip(dims);
    EXPECT_TRUE(torch::equal(b.input[i][0], crop)) << "crop " << i;
  }
  for (int d = 0; d < 3; ++d) {
    EXPECT_GT(flipped[d], 0) << "axis " << d;
    EXPECT_LT(flipped[d], 32) << "axis " << d;
  }
  MriOptions no_flips;
  no_flips.flips = false;
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(make(8, 3, no_flips).placement(i, Subset::kTrain).flipped, (std::array<bool, 3>{}));
}

TEST(Mri, HeldOutSlabIsDisjointAndCropsHoldBrain) {
  const MriDataset ds = make(8, 9);  // X = 30, held_out_fraction 0.4: held out x >= 18
  ASSERT_EQ(ds.held_out_begin(), 18);
  for (int64_t i = 0; i < 64; ++i) {
    const auto train = ds.placement(i, Subset::kTrain);
    const auto held = ds.placement(i, Subset::kHeldOut);
    EXPECT_LE(train.origin[2] + 8, 18);
    EXPECT_GE(held.origin[2], 18);
    EXPECT_LE(held.origin[2] + 8, 30);
    EXPECT_EQ(held.flipped, (std::array<bool, 3>{}));
  }
  VolumeBatch train = ds.sample(0, 16), held = ds.sample(0, 16, Subset::kHeldOut);
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_GT(train.target[i].sum().item<float>(), 0) << "training crop " << i << " has no brain";
    EXPECT_GT(held.target[i].sum().item<float>(), 0) << "held-out crop " << i << " has no brain";
  }
  MriOptions none;
  none.held_out_fraction = 0;
  expect_error([&] { make(8, 9, none).sample(0, 1, Subset::kHeldOut); }, {"no held-out set"});
}

TEST(Mri, CropTooLargeNamesSizes) {
  expect_error([] { make(21, 1); }, {"crop 21", "[20, 24, 30]", phantom().image, "1..20"});
  expect_error([] { make(13, 1); }, {"crop 13", "held-out slab x in [18, 30)", "12 columns"});
  MriOptions big;
  big.held_out_fraction = 0.9;
  expect_error([&] { make(8, 1, big); }, {"crop 8", "training slab x in [0, 3)"});
}

TEST(Mri, ShapeMismatchNamesBothFiles) {
  const std::string other = testing::scratch_path("tandem_mri_other_", "other.nii");
  Volume v;
  v.data = torch::ones({20, 24, 29});
  write_nifti(other, v);
  expect_error([&] { MriDataset(phantom().image, other, 8, 1); },
               {phantom().image, other, "[20, 24, 30]", "[20, 24, 29]"});
}

constexpr const char* kCh2 = "/usr/share/mricron/templates/ch2.nii.gz";
constexpr const char* kCh2Bet = "/usr/share/mricron/templates/ch2bet.nii.gz";

TEST(Mri, RealCh2IfInstalled) {
  struct stat st;
  if (::stat(kCh2, &st) != 0 || ::stat(kCh2Bet, &st) != 0)
    GTEST_SKIP() << kCh2 << " or " << kCh2Bet << " is missing (apt install mricron-data, or run "
                 << "scripts/setup)";
  const MriDataset ds(kCh2, kCh2Bet, 64, 1);
  EXPECT_EQ(ds.image().sizes(), (std::vector<int64_t>{181, 217, 181}));
  EXPECT_EQ(ds.held_out_begin(), 181 - 72);
  VolumeBatch train = ds.sample(0, 4), held = ds.sample(0, 4, Subset::kHeldOut);
  EXPECT_EQ(train.input.sizes(), (std::vector<int64_t>{4, 1, 64, 64, 64}));
  for (int64_t i = 0; i < 4; ++i) {
    const double brain = train.target[i].mean().item<double>();
    EXPECT_GT(brain, 0.05) << "training crop " << i;
    EXPECT_GT(held.target[i].mean().item<double>(), 0.05) << "held-out crop " << i;
  }
  EXPECT_TRUE(torch::equal(ds.sample(2, 1).input[0], train.input[2]));
  expect_error([] { MriDataset(kCh2, kCh2Bet, 200, 1); }, {"crop 200", "[181, 217, 181]"});
}

}  // namespace
}  // namespace tandem::data
