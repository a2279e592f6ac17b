// Folders of image and label NIfTI files: pairing, the split by file, channels, crops, labels.
#include "tandem/data/nifti_folder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/file_bytes.h"
#include "data/normalize.h"
#include "expect_error.h"
#include "scratch.h"
#include "tandem/common/check.h"
#include "tandem/data/nifti.h"

namespace tandem::data {
namespace {
namespace fs = std::filesystem;

// An empty folder with images/ and labels/.
std::string folder(const std::string& name) {
  const std::string dir = testing::scratch_path("tandem_folder_", name);
  fs::remove_all(dir);
  fs::create_directories(dir + "/images");
  fs::create_directories(dir + "/labels");
  return dir;
}

Volume volume(torch::Tensor data) {
  Volume v;
  v.data = std::move(data);
  v.spacing = {1, 1, 1};
  return v;
}

constexpr const char* kCh2 = "/usr/share/mricron/templates/ch2.nii.gz";
constexpr const char* kCh2Bet = "/usr/share/mricron/templates/ch2bet.nii.gz";

TEST(NiftiFolder, MriAsAOnePairFolder) {
  struct stat st;
  if (::stat(kCh2, &st) != 0 || ::stat(kCh2Bet, &st) != 0)
    GTEST_SKIP() << "mricron-data is missing (scripts/setup installs it)";
  // The T1 image as it is; the label a 0/1 brain mask, written as uint8.
  const std::string dir = folder("ch2");
  fs::copy_file(kCh2, dir + "/images/ch2.nii.gz");
  const torch::Tensor brain = read_nifti(kCh2Bet).data.gt(0).to(torch::kFloat32);
  NiftiWriteOptions u8;
  u8.type = NiftiType::kUInt8;
  write_nifti(dir + "/labels/ch2.nii.gz", volume(brain), u8);

  const std::vector<NiftiPair> pairs = list_nifti_pairs(dir);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].name, "ch2.nii.gz");
  EXPECT_EQ(pairs[0].shape, (std::array<int64_t, 4>{1, 181, 217, 181}));
  expect_error(
      [&] {
        NiftiFolder(dir, {32, 1, LabelKind::kMask, 0});
      },
      {"NiftiFolderOptions::test_files = 1 leaves no file of the 1", "use 0..0"});

  const NiftiFolder set(dir, {32, 0, LabelKind::kMask, 7});
  const VolumeBatch b = set.sample(0, 4, Subset::kTrain);
  EXPECT_EQ(b.input.sizes(), (std::vector<int64_t>{4, 1, 32, 32, 32}));
  EXPECT_EQ(b.target.sizes(), (std::vector<int64_t>{4, 1, 32, 32, 32}));
  EXPECT_TRUE(torch::equal(b.target, b.target.gt(0.5).to(torch::kFloat32)));
  // Crop i is a function of (seed, i) alone.
  EXPECT_TRUE(torch::equal(set.sample(2, 1, Subset::kTrain).input, b.input.slice(0, 2, 3)));
  EXPECT_FALSE(torch::equal(
      NiftiFolder(dir, {32, 0, LabelKind::kMask, 8}).sample(0, 4, Subset::kTrain).input, b.input));
  // A crop of 181^3 spans Z and X whole; its origin along Y (217 voxels) is drawn. It is the
  // image standardized over all its voxels (to 1e-5: the mean and deviation may be summed in
  // another order than here) and, exactly, the mask at the same place.
  const NiftiFolder whole(dir, {181, 0, LabelKind::kMask, 0});
  const VolumeBatch w = whole.sample(0, 1, Subset::kTrain);
  const torch::Tensor image = read_nifti(kCh2).data.to(torch::kFloat64);
  const torch::Tensor standard = ((image - image.mean()) / image.std()).to(torch::kFloat32);
  int found = 0;
  for (int64_t y = 0; y + 181 <= 217; ++y)
    if (torch::equal(w.target[0], brain.narrow(2, y, 181)) &&
        torch::allclose(w.input[0], standard.narrow(2, y, 181), 0, 1e-5))
      ++found;
  EXPECT_EQ(found, 1) << "the whole-volume crop is not one Y-window of the standardized image";
}

// Three pairs of 2-channel int16 images (scl_slope 0.5, scl_inter -3) of 8^3 voxels: channel 1
// is 40 - channel 0. Labels: all 0 in the training files, all 1 in the last (held-out) file.
std::string multi_folder() {
  const std::string dir = folder("multi");
  NiftiWriteOptions i16;
  i16.type = NiftiType::kInt16;
  i16.scl_slope = 0.5f;
  i16.scl_inter = -3.0f;
  NiftiWriteOptions u8;
  u8.type = NiftiType::kUInt8;
  for (int k = 0; k < 3; ++k) {
    torch::Tensor c0 = torch::arange(512, torch::kFloat32).view({8, 8, 8}).remainder(37 + k) * 0.5;
    write_nifti(dir + "/images/case" + std::to_string(k) + ".nii.gz",
                volume(torch::stack({c0, 40 - c0})), i16);
    write_nifti(dir + "/labels/case" + std::to_string(k) + ".nii.gz",
                volume(torch::full({8, 8, 8}, k == 2 ? 1.0f : 0.0f)), u8);
  }
  return dir;
}

TEST(NiftiFolder, FourDimensionalInt16ImagesWithSlopeAndAHeldOutFile) {
  const std::string dir = multi_folder();
  const NiftiFolder set(dir, {8, 1, LabelKind::kMask, 3});
  EXPECT_EQ(set.channels(), 2);
  EXPECT_EQ(set.train_files(), 2);
  const VolumeBatch train = set.sample(0, 6, Subset::kTrain);
  const VolumeBatch held = set.sample(0, 3, Subset::kHeldOut);
  EXPECT_EQ(train.input.sizes(), (std::vector<int64_t>{6, 2, 8, 8, 8}));
  // Split by file: training crops come from the first two files, held-out ones from the last.
  EXPECT_EQ(train.target.sum().item<double>(), 0.0);
  EXPECT_EQ(held.target.sum().item<double>(), 3.0 * 512);
  // The crop is the whole volume: each channel normalized to mean 0, deviation 1 (float
  // rounding: 1e-5), and channel 1 the negative of channel 0, since it is 40 minus it.
  const torch::Tensor x = held.input[0].to(torch::kFloat64);
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(x[c].mean().item<double>(), 0.0, 1e-5);
    EXPECT_NEAR(x[c].std().item<double>(), 1.0, 1e-5);
  }
  EXPECT_TRUE(torch::allclose(x[1], -x[0], 0, 1e-5));
  // The scaling slope was applied: raw int16 values read through the slope give the ramp.
  const Volume raw = read_nifti(dir + "/images/case2.nii.gz");
  const torch::Tensor c0 = torch::arange(512, torch::kFloat32).view({8, 8, 8}).remainder(39) * 0.5;
  EXPECT_TRUE(torch::equal(raw.data[0], c0));
  EXPECT_TRUE(torch::equal(raw.data[1], 40 - c0));
}

// --normalize dataset: per channel, the moments over the training files' voxels only (the
// held-out file left out), applied to every file; none: the values as stored.
TEST(NiftiFolder, NormalizationOverTheTrainingFilesOrNone) {
  const std::string dir = multi_folder();
  const NiftiFolderOptions o{8, 1, LabelKind::kMask, 3};
  const NiftiFolder set(dir, o, {Normalize::kDataset});
  const Normalization n = set.normalization();
  const torch::Tensor f0 = read_nifti(dir + "/images/case0.nii.gz").data;
  const torch::Tensor f1 = read_nifti(dir + "/images/case1.nii.gz").data;
  const torch::Tensor f2 = read_nifti(dir + "/images/case2.nii.gz").data;
  EXPECT_EQ(n, dataset_moments({f0, f1}));
  EXPECT_NE(n, dataset_moments({f0, f1, f2}));
  const torch::Tensor held = set.sample(0, 1, Subset::kHeldOut).input[0];
  EXPECT_TRUE(torch::equal(
      held[1], ((f2[1].to(torch::kFloat64) - n.mean[1]) / n.deviation[1]).to(torch::kFloat32)));
  EXPECT_TRUE(torch::equal(
      NiftiFolder(dir, o, {Normalize::kNone}).sample(0, 1, Subset::kHeldOut).input[0], f2));
  EXPECT_THROW(NiftiFolder(dir, o, {Normalize::kPerImage, true}), Error);
}

TEST(NiftiFolder, LabelsOtherThanZeroAndOneAreRefusedForMasks) {
  const std::string dir = folder("multiclass");
  torch::Tensor label = torch::zeros({8, 8, 8});
  label[0][0][0] = 2;
  label[0][0][1] = 4;
  label[0][0][2] = 1;
  write_nifti(dir + "/images/a.nii", volume(torch::rand({8, 8, 8})));
  write_nifti(dir + "/labels/a.nii", volume(label));
  const NiftiFolder masks(dir, {8, 0, LabelKind::kMask, 0});  // headers: fine
  expect_error([&] { masks.load(); },
               {dir + "/labels/a.nii", "values other than 0 and 1 (2, 4)", "label > 0"});
  // Real-valued targets (the mean squared error) take the values as they are.
  const NiftiFolder reals(dir, {8, 0, LabelKind::kReal, 0});
  EXPECT_TRUE(torch::equal(reals.sample(0, 1, Subset::kTrain).target[0][0], label));
}

TEST(NiftiFolder, BadFoldersNameTheFile) {
  const std::string missing = ::testing::TempDir() + "tandem_no_such_folder";
  expect_error([&] { list_nifti_pairs(missing); }, {missing + "/images", "labels/"});
  const std::string empty = folder("empty");
  expect_error([&] { list_nifti_pairs(empty); }, {empty + "/images", "no .nii or .nii.gz"});

  const std::string unpaired = folder("unpaired");
  write_nifti(unpaired + "/images/a.nii", volume(torch::zeros({8, 8, 8})));
  write_nifti(unpaired + "/images/b.nii", volume(torch::zeros({8, 8, 8})));
  write_nifti(unpaired + "/labels/a.nii", volume(torch::zeros({8, 8, 8})));
  expect_error([&] { list_nifti_pairs(unpaired); },
               {unpaired + "/images/b.nii", "has no label", unpaired + "/labels/b.nii"});

  const std::string shapes = folder("shapes");
  write_nifti(shapes + "/images/a.nii", volume(torch::zeros({8, 8, 8})));
  write_nifti(shapes + "/labels/a.nii", volume(torch::zeros({8, 8, 7})));
  expect_error([&] { list_nifti_pairs(shapes); },
               {shapes + "/labels/a.nii", "[1, 8, 8, 7]", "[1, 8, 8, 8]"});

  const std::string channels = folder("channels");
  write_nifti(channels + "/images/a.nii", volume(torch::zeros({2, 8, 8, 8})));
  write_nifti(channels + "/images/b.nii", volume(torch::zeros({8, 8, 8})));
  for (const char* n : {"a.nii", "b.nii"})
    write_nifti(channels + "/labels/" + n, volume(torch::zeros({8, 8, 8})));
  expect_error([&] { list_nifti_pairs(channels); },
               {channels + "/images/b.nii", "1 channels", "has 2"});

  const std::string small = folder("small");
  write_nifti(small + "/images/a.nii", volume(torch::zeros({8, 12, 9})));
  write_nifti(small + "/labels/a.nii", volume(torch::zeros({8, 12, 9})));
  expect_error(
      [&] {
        NiftiFolder(small, {16, 0, LabelKind::kMask, 0});
      },
      {"16^3 does not fit", small + "/images/a.nii", "[1, 8, 12, 9]",
       "NiftiFolderOptions::crop = 8"});

  // A file cut short passes the header checks and is named when the voxels are read.
  const std::string truncated = folder("truncated");
  write_nifti(truncated + "/images/a.nii", volume(torch::zeros({8, 8, 8})));
  write_nifti(truncated + "/labels/a.nii", volume(torch::zeros({8, 8, 8})));
  std::vector<uint8_t> bytes = read_file_bytes(truncated + "/images/a.nii");
  bytes.resize(bytes.size() - 100);
  write_file_bytes(truncated + "/images/a.nii", bytes, false);
  const NiftiFolder cut(truncated, {8, 0, LabelKind::kMask, 0});
  expect_error([&] { cut.load(); }, {truncated + "/images/a.nii", "is truncated"});
}

}  // namespace
}  // namespace tandem::data
