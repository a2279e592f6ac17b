#include "tandem/data/nifti.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "tandem/common/check.h"
#include "tandem/data/file_bytes.h"
#include "tandem/data/nifti_format.h"

namespace tandem::data {
namespace {
namespace nf = nifti_format;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "tandem_nifti_" + std::to_string(::getpid()) + "_" + name;
}

template <typename F>
void expect_error(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// A [Z,Y,X] = [2,3,4] volume whose voxel (i,j,k) holds 12k + 4j + i, plus `offset`.
Volume ramp(double scale = 1.0, double offset = 0.0) {
  Volume v;
  v.data = (torch::arange(24, torch::kFloat32).view({2, 3, 4}) * scale + offset);
  v.spacing = {3.0f, 2.0f, 0.5f};
  return v;
}

struct Case {
  NiftiType type;
  double scale, offset;  // values representable exactly in the type
};

class NiftiRoundTrip : public ::testing::TestWithParam<std::tuple<Case, bool, bool>> {};

TEST_P(NiftiRoundTrip, ValuesShapeAndSpacingSurvive) {
  const auto [c, gzip, big_endian] = GetParam();
  const Volume v = ramp(c.scale, c.offset);
  const std::string path = temp_path("rt_" + std::to_string(int(c.type)) +
                                     (big_endian ? "_be" : "") + (gzip ? ".nii.gz" : ".nii"));
  NiftiWriteOptions options;
  options.type = c.type;
  options.big_endian = big_endian;
  write_nifti(path, v, options);
  EXPECT_EQ(is_gzip_file(path), gzip);
  const Volume r = read_nifti(path);
  EXPECT_EQ(r.data.sizes(), v.data.sizes());
  EXPECT_EQ(r.data.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(r.data, v.data)) << r.data;
  EXPECT_EQ(r.spacing, v.spacing);
  // NIfTI order: voxel (i=3, j=1, k=0) is stored at byte offset 352 + (3 + 4*1) * width.
  EXPECT_FLOAT_EQ(r.data[0][1][3].item<float>(), float(7 * c.scale + c.offset));
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, NiftiRoundTrip,
    ::testing::Combine(::testing::Values(Case{NiftiType::kUInt8, 10, 5},
                                         Case{NiftiType::kInt8, 5, -60},
                                         Case{NiftiType::kInt16, 1000, -12000},
                                         Case{NiftiType::kUInt16, 2000, 1000},
                                         Case{NiftiType::kInt32, 80000000, -900000000},
                                         Case{NiftiType::kUInt32, 150000000, 1},
                                         Case{NiftiType::kFloat32, 0.25, -3},
                                         Case{NiftiType::kFloat64, 0.125, 1e-3}),
                       ::testing::Bool(), ::testing::Bool()));

TEST(Nifti, ScalingIsApplied) {
  const std::string path = temp_path("scaled.nii");
  NiftiWriteOptions options;
  options.type = NiftiType::kInt16;
  options.scl_slope = 0.5f;
  options.scl_inter = 10.0f;
  const Volume v = ramp(1.5, 3.0);  // stored as (v - 10) / 0.5 = 3i - 14: exact in int16
  write_nifti(path, v, options);
  EXPECT_TRUE(torch::equal(read_nifti(path).data, v.data));
  // The raw stored value of voxel 0 is (3 - 10) / 0.5 = -14.
  std::vector<uint8_t> bytes = read_file_bytes(path);
  EXPECT_EQ(nf::load<int16_t>(bytes.data(), 352, false), -14);
}

TEST(Nifti, ZeroSlopeMeansNoScaling) {
  const std::string path = temp_path("unscaled.nii");
  NiftiWriteOptions options;
  options.type = NiftiType::kUInt8;
  write_nifti(path, ramp(), options);
  std::vector<uint8_t> bytes = read_file_bytes(path);
  nf::store<float>(bytes.data(), nf::kSclInter, 100.0f, false);  // ignored while slope is 0
  write_file_bytes(path, bytes, false);
  EXPECT_TRUE(torch::equal(read_nifti(path).data, ramp().data));
}

TEST(Nifti, TruncatedFileGivesExpectedAndActualBytes) {
  const std::string path = temp_path("truncated.nii.gz");
  NiftiWriteOptions options;
  options.type = NiftiType::kInt16;
  write_nifti(path, ramp(), options);  // 352 + 24 * 2 = 400 bytes
  std::vector<uint8_t> bytes = read_file_bytes(path);
  bytes.resize(390);
  write_file_bytes(path, bytes, true);
  expect_error([&] { read_nifti(path); }, {path, "truncated", "need 400 bytes", "holds 390"});
  // The header alone still gives the shape [Z,Y,X].
  const auto sizes = ramp().data.sizes();
  EXPECT_EQ(read_nifti_shape(path), (std::array<int64_t, 3>{sizes[0], sizes[1], sizes[2]}));
  bytes.resize(200);  // not even a whole header
  write_file_bytes(path, bytes, true);
  expect_error([&] { read_nifti_shape(path); }, {path, "fewer than the 348-byte header"});
}

// Writes a valid file, lets `edit` change its header, and returns the path.
template <typename F>
std::string edited(const std::string& name, F edit) {
  const std::string path = temp_path(name);
  write_nifti(path, ramp());
  std::vector<uint8_t> bytes = read_file_bytes(path);
  edit(bytes.data());
  write_file_bytes(path, bytes, false);
  return path;
}

TEST(Nifti, BadMagicRejected) {
  const std::string path =
      edited("bad_magic.nii", [](uint8_t* h) { std::memcpy(h + nf::kMagic, "abcd", 4); });
  expect_error([&] { read_nifti(path); }, {path, "not \"n+1\\0\"", "61 62 63 64"});
}

TEST(Nifti, PairHeaderRejectedWithHint) {
  const std::string path =
      edited("pair.nii", [](uint8_t* h) { std::memcpy(h + nf::kMagic, "ni1", 4); });
  expect_error([&] { read_nifti(path); }, {path, ".hdr/.img pair", ".nii.gz"});
}

TEST(Nifti, BadSizeofHdrRejected) {
  const std::string path =
      edited("hdr.nii", [](uint8_t* h) { nf::store<int32_t>(h, 0, 349, false); });
  expect_error([&] { read_nifti(path); }, {path, "sizeof_hdr is 349"});
  const std::string v2 = edited("v2.nii", [](uint8_t* h) { nf::store<int32_t>(h, 0, 540, false); });
  expect_error([&] { read_nifti(v2); }, {v2, "NIfTI-2"});
}

TEST(Nifti, UnsupportedDatatypeNamesCode) {
  const std::string path =
      edited("complex.nii", [](uint8_t* h) { nf::store<int16_t>(h, nf::kDatatype, 32, false); });
  expect_error([&] { read_nifti(path); }, {path, "datatype code 32"});
}

TEST(Nifti, BadDimsRejected) {
  const std::string rank =
      edited("rank.nii", [](uint8_t* h) { nf::store<int16_t>(h, nf::kDim, 8, false); });
  expect_error([&] { read_nifti(rank); }, {rank, "dim[0] = 8"});
  const std::string zero =
      edited("zero.nii", [](uint8_t* h) { nf::store<int16_t>(h, nf::kDim + 4, 0, false); });
  expect_error([&] { read_nifti(zero); }, {zero, "dim[2] = 0"});
  const std::string four = edited("four.nii", [](uint8_t* h) {
    nf::store<int16_t>(h, nf::kDim, 4, false);
    nf::store<int16_t>(h, nf::kDim + 8, 5, false);
  });
  expect_error([&] { read_nifti(four); }, {four, "dim[4] = 5", "fslroi"});
}

TEST(Nifti, LowerRankAndTrailingUnitDimsAccepted) {
  const std::string two = edited("two.nii", [](uint8_t* h) {
    nf::store<int16_t>(h, nf::kDim, 2, false);  // X=4, Y=3: the first 12 voxels
  });
  EXPECT_TRUE(torch::equal(read_nifti(two).data, ramp().data[0].unsqueeze(0)));
  const std::string five =
      edited("five.nii", [](uint8_t* h) { nf::store<int16_t>(h, nf::kDim, 5, false); });
  EXPECT_TRUE(torch::equal(read_nifti(five).data, ramp().data));
}

TEST(Nifti, VoxOffsetInsideHeaderRejected) {
  const std::string path =
      edited("offset.nii", [](uint8_t* h) { nf::store<float>(h, nf::kVoxOffset, 100.0f, false); });
  expect_error([&] { read_nifti(path); }, {path, "vox_offset 100"});
}

TEST(Nifti, MissingFileNamesPath) {
  const std::string path = temp_path("missing.nii.gz");
  expect_error([&] { read_nifti(path); }, {path, "cannot open"});
}

TEST(Nifti, IntegerOverflowOnWriteRejected) {
  NiftiWriteOptions options;
  options.type = NiftiType::kUInt8;
  expect_error([&] { write_nifti(temp_path("overflow.nii"), ramp(20.0), options); },
               {"value 260", "does not fit"});
}

constexpr const char* kCh2 = "/usr/share/mricron/templates/ch2.nii.gz";
constexpr const char* kCh2Bet = "/usr/share/mricron/templates/ch2bet.nii.gz";

TEST(Nifti, RealCh2IfInstalled) {
  struct stat st;
  if (::stat(kCh2, &st) != 0 || ::stat(kCh2Bet, &st) != 0)
    GTEST_SKIP() << kCh2 << " or " << kCh2Bet << " is missing (apt install mricron-data, or run "
                 << "scripts/setup)";
  const Volume image = read_nifti(kCh2);
  const Volume mask = read_nifti(kCh2Bet);
  EXPECT_EQ(image.data.sizes(), (std::vector<int64_t>{181, 217, 181}));
  EXPECT_EQ(mask.data.sizes(), image.data.sizes());
  EXPECT_EQ(image.spacing, (std::array<float, 3>{1.0f, 1.0f, 1.0f}));
  // uint8 data: whole numbers in 0..255, and the brain is a sizeable part of the box.
  EXPECT_GE(image.data.min().item<float>(), 0.0f);
  EXPECT_LE(image.data.max().item<float>(), 255.0f);
  EXPECT_TRUE(torch::equal(image.data, image.data.round()));
  const double brain = mask.data.gt(0).to(torch::kFloat64).mean().item<double>();
  EXPECT_GT(brain, 0.1);
  EXPECT_LT(brain, 0.5);
}

}  // namespace
}  // namespace tandem::data
