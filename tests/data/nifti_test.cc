#include "tandem/data/nifti.h"

#include <gtest/gtest.h>
#include <nifti1.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "data/file_bytes.h"
#include "expect_error.h"
#include "scratch.h"
#include "tandem/common/check.h"

namespace tandem::data {
namespace {

std::string temp_path(const std::string& name) {
  return testing::scratch_path("tandem_nifti_", name);
}

// A [Z,Y,X] = [2,3,4] volume whose voxel (i,j,k) holds 12k + 4j + i, times `scale` plus
// `offset`.
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

class NiftiRoundTrip : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(NiftiRoundTrip, ValuesShapeAndSpacingSurvive) {
  const auto [c, gzip] = GetParam();
  const Volume v = ramp(c.scale, c.offset);
  const std::string path =
      temp_path("rt_" + std::to_string(int(c.type)) + (gzip ? ".nii.gz" : ".nii"));
  NiftiWriteOptions options;
  options.type = c.type;
  write_nifti(path, v, options);
  EXPECT_EQ(is_gzip_file(path), gzip);
  const Volume r = read_nifti(path);
  EXPECT_EQ(r.data.sizes(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(r.data.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(r.data[0], v.data)) << r.data;
  EXPECT_EQ(r.spacing, v.spacing);
  EXPECT_EQ(read_nifti_shape(path), (std::array<int64_t, 4>{1, 2, 3, 4}));
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, NiftiRoundTrip,
    ::testing::Combine(
        ::testing::Values(
            Case{NiftiType::kUInt8, 10, 5}, Case{NiftiType::kInt8, 5, -60},
            Case{NiftiType::kInt16, 1000, -12000}, Case{NiftiType::kUInt16, 2000, 1000},
            Case{NiftiType::kInt32, 80000000, -900000000}, Case{NiftiType::kUInt32, 150000000, 1},
            Case{NiftiType::kInt64, 1e9, -3e9}, Case{NiftiType::kUInt64, 1e9, 7},
            Case{NiftiType::kFloat32, 0.25, -3}, Case{NiftiType::kFloat64, 0.125, 1e-3}),
        ::testing::Bool()));

// NIfTI-2 files as nibabel writes them (tests/data/make_fixtures.py, Debian's python3): the
// ramp as float32 .nii, and stored as int16 in a .nii.gz with scl_slope 0.5 and scl_inter 10,
// which reads as ramp * 0.5 + 10.
TEST(Nifti, Nifti2FromNibabel) {
  const std::string dir = temp_path("nifti2");
  const std::string command = std::string(TANDEM_FIXTURE_PYTHON) + " " + TANDEM_SOURCE_DIR +
                              "/tests/data/make_fixtures.py nifti2 " + dir;
  ASSERT_EQ(std::system(command.c_str()), 0)
      << command << " failed: it needs python3-nibabel (scripts/setup installs it)";
  for (const bool scaled : {false, true}) {
    const std::string path = dir + (scaled ? "/ramp_v2_int16.nii.gz" : "/ramp_v2.nii");
    int32_t sizeof_hdr = 0;
    std::memcpy(&sizeof_hdr, read_file_prefix(path, 4).data(), 4);
    EXPECT_EQ(sizeof_hdr, 540) << path;
    const Volume r = read_nifti(path);
    EXPECT_TRUE(torch::equal(r.data[0], scaled ? ramp(0.5, 10).data : ramp().data)) << path << "\n"
                                                                                    << r.data;
    EXPECT_EQ(r.spacing, ramp().spacing) << path;
  }
}

TEST(Nifti, VoxelOrderIsNiftiOrder) {
  // Voxel (i=3, j=1, k=0) is stored 3 + 4 * 1 = 7 voxels after the data start (byte 352 of a
  // single-file NIfTI-1 volume), and lands at data[0][0][1][3].
  const std::string path = temp_path("order.nii");
  NiftiWriteOptions options;
  options.type = NiftiType::kUInt8;
  write_nifti(path, ramp(), options);
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  ASSERT_EQ(bytes.size(), 352u + 24u);
  EXPECT_EQ(bytes[352 + 7], 7);
  EXPECT_EQ(read_nifti(path).data[0][0][1][3].item<float>(), 7.0f);
}

TEST(Nifti, Int16WithScalingSlope) {
  const std::string path = temp_path("scaled.nii.gz");
  NiftiWriteOptions options;
  options.type = NiftiType::kInt16;
  options.scl_slope = 0.5f;
  options.scl_inter = 10.0f;
  const Volume v = ramp(1.5, 3.0);  // stored as (v - 10) / 0.5 = 3i - 14: exact in int16
  write_nifti(path, v, options);
  EXPECT_TRUE(torch::equal(read_nifti(path).data[0], v.data));
  // The raw stored value of voxel 0 is (3 - 10) / 0.5 = -14.
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  nifti_1_header h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  EXPECT_EQ(h.datatype, DT_INT16);
  EXPECT_EQ(h.scl_slope, 0.5f);
  int16_t first = 0;
  std::memcpy(&first, bytes.data() + 352, 2);
  EXPECT_EQ(first, -14);
}

// Writes `volume` as a plain .nii, lets `edit` change its NIfTI-1 header, and returns the path.
template <typename F>
std::string edited(const std::string& name, F edit, const Volume& volume = ramp(),
                   NiftiType type = NiftiType::kFloat32) {
  const std::string path = temp_path(name);
  NiftiWriteOptions options;
  options.type = type;
  write_nifti(path, volume, options);
  std::vector<uint8_t> bytes = read_file_bytes(path);
  nifti_1_header h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  edit(h);
  std::memcpy(bytes.data(), &h, sizeof(h));
  write_file_bytes(path, bytes, false);
  return path;
}

TEST(Nifti, ZeroSlopeMeansNoScaling) {
  const std::string path =
      edited("unscaled.nii", [](nifti_1_header& h) { h.scl_inter = 100.0f; });  // slope is 0
  EXPECT_TRUE(torch::equal(read_nifti(path).data[0], ramp().data));
}

TEST(Nifti, FourDimensionalImagesAreChannels) {
  // Three volumes [3,Z,Y,X]: channel c is the ramp plus 100 c. dim[4] = 3 in the file.
  Volume v = ramp();
  v.data = torch::stack({v.data, v.data + 100, v.data + 200});
  const std::string path = temp_path("four.nii.gz");
  write_nifti(path, v);
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  nifti_1_header h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  EXPECT_EQ(h.dim[0], 4);
  EXPECT_EQ(h.dim[4], 3);
  EXPECT_EQ(read_nifti_shape(path), (std::array<int64_t, 4>{3, 2, 3, 4}));
  EXPECT_TRUE(torch::equal(read_nifti(path).data, v.data));
  // dims 5 to 7 are channels too, dim[4] fastest: [t=3, u=2] -> 6 channels.
  const std::string five = edited(
      "five.nii",
      [](nifti_1_header& h) {
        h.dim[0] = 5;
        h.dim[4] = 3;
        h.dim[5] = 2;
      },
      [] {
        Volume six = ramp();
        six.data = torch::stack(
            {six.data, six.data + 1, six.data + 2, six.data + 3, six.data + 4, six.data + 5});
        return six;
      }());
  const Volume r = read_nifti(five);
  ASSERT_EQ(r.data.sizes(), (std::vector<int64_t>{6, 2, 3, 4}));
  EXPECT_TRUE(torch::equal(r.data[4], ramp().data + 4));
}

TEST(Nifti, LowerRankIsOneSlice) {
  const std::string two = edited("two.nii", [](nifti_1_header& h) {
    h.dim[0] = 2;  // X=4, Y=3: the first 12 voxels
  });
  EXPECT_TRUE(torch::equal(read_nifti(two).data, ramp().data[0].view({1, 1, 3, 4})));
}

TEST(Nifti, Rgb24VoxelsAreThreeChannels) {
  // A uint8 [Z,Y,3X] volume whose header then says RGB24 with X columns: voxel (i,j,k) has
  // colours bytes 3i, 3i+1, 3i+2 of row (j,k).
  Volume bytes;
  bytes.data = torch::arange(2 * 3 * 12, torch::kFloat32).view({2, 3, 12});
  const std::string path = edited(
      "rgb.nii",
      [](nifti_1_header& h) {
        h.datatype = DT_RGB24;
        h.bitpix = 24;
        h.dim[1] = 4;
      },
      bytes, NiftiType::kUInt8);
  const Volume r = read_nifti(path);
  ASSERT_EQ(r.data.sizes(), (std::vector<int64_t>{3, 2, 3, 4}));
  for (int colour = 0; colour < 3; ++colour)
    EXPECT_TRUE(torch::equal(r.data[colour], bytes.data.slice(2, colour, 12, 3))) << colour;
}

TEST(Nifti, TruncatedDataGivesExpectedAndActualBytes) {
  NiftiWriteOptions options;
  options.type = NiftiType::kInt16;
  for (const std::string name : {"truncated.nii", "truncated.nii.gz"}) {
    const std::string path = temp_path(name);
    write_nifti(path, ramp(), options);  // 352 + 24 * 2 = 400 bytes
    std::vector<uint8_t> bytes = read_file_bytes(path);
    bytes.resize(390);
    write_file_bytes(path, bytes, is_gzip_file(path));
    expect_error([&] { read_nifti(path); },
                 {"'" + path + "' is truncated", "24 voxels of 2 bytes from byte 352",
                  "400 bytes in all", "holds 390"});
    // The header alone still gives the shape.
    EXPECT_EQ(read_nifti_shape(path), (std::array<int64_t, 4>{1, 2, 3, 4}));
  }
}

TEST(Nifti, NotNiftiFilesNameTheirSize) {
  const std::string text = temp_path("text.nii");
  const std::string hello = "hello, this is not a volume\n";
  write_file_bytes(text, std::vector<uint8_t>(hello.begin(), hello.end()), false);
  expect_error([&] { read_nifti(text); }, {text, "not a NIfTI file", "holds 28"});
  std::vector<uint8_t> bytes = read_file_bytes(edited("short.nii", [](nifti_1_header&) {}));
  bytes.resize(200);  // not even a whole header
  const std::string short_header = temp_path("short.nii.gz");
  write_file_bytes(short_header, bytes, true);
  expect_error([&] { read_nifti_shape(short_header); },
               {short_header, "not a NIfTI file", "holds 200 (decompressed) bytes"});
}

TEST(Nifti, GzipNamedNiiRejected) {
  const std::string gz = temp_path("real.nii.gz");
  write_nifti(gz, ramp());
  const std::string path = temp_path("gzip_named.nii");
  std::vector<uint8_t> compressed = read_file_prefix(gz, 1 << 20);  // decompressed...
  write_file_bytes(path, compressed, true);                         // ...and gzip again
  expect_error([&] { read_nifti(path); }, {path, "gzip-compressed", "rename it"});
}

TEST(Nifti, BadDimsAndDatatypesRejected) {
  const std::string rank = edited("rank.nii", [](nifti_1_header& h) { h.dim[0] = 8; });
  expect_error([&] { read_nifti(rank); }, {rank, "dim [8, 4, 3, 2", "dim[0] in 1..7"});
  const std::string unknown = edited("dt33.nii", [](nifti_1_header& h) { h.datatype = 33; });
  expect_error([&] { read_nifti(unknown); }, {unknown, "datatype 33"});
  const std::string complex = edited("complex.nii", [](nifti_1_header& h) {
    h.datatype = DT_COMPLEX64;
    h.bitpix = 64;
  });
  expect_error([&] { read_nifti(complex); }, {complex, "complex voxels (COMPLEX64)"});
}

// A damaged or hostile header may declare terabytes: refused from the file's size before any
// allocation (nifticlib would allocate what the header declares, then read).
TEST(Nifti, HeadersDeclaringHugeVolumesAreRefusedBeforeReading) {
  const std::string huge =
      edited("huge.nii", [](nifti_1_header& h) { h.dim[1] = h.dim[2] = h.dim[3] = 30000; });
  expect_error([&] { read_nifti(huge); },
               {huge, "is truncated", "27000000000000 voxels of 4 bytes from byte 352",
                "108000000000352 bytes in all", "holds 448 bytes"});
  const std::string gz = temp_path("huge.nii.gz");
  write_file_bytes(gz, read_file_bytes(huge), true);
  expect_error([&] { read_nifti(gz); },
               {gz, "is truncated", "27000000000000 voxels", "compressed bytes, at most"});
  // Seven dimensions of 32767: the voxel count wraps around 64 bits.
  const std::string wraps = edited("wraps.nii", [](nifti_1_header& h) {
    h.dim[0] = 7;
    for (int d = 1; d <= 7; ++d) h.dim[d] = 32767;
  });
  expect_error([&] { read_nifti_shape(wraps); }, {wraps, "does not fit in 64 bits"});
  expect_error([&] { read_nifti(wraps); }, {wraps, "does not fit in 64 bits"});
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
  EXPECT_EQ(image.data.sizes(), (std::vector<int64_t>{1, 181, 217, 181}));
  EXPECT_EQ(mask.data.sizes(), image.data.sizes());
  EXPECT_EQ(image.spacing, (std::array<float, 3>{1.0f, 1.0f, 1.0f}));
  // ch2 is uint8 with scl_slope 1 and scl_inter 0: the voxels are its bytes after the 352-byte
  // header, in file order.
  for (const char* path : {kCh2, kCh2Bet}) {
    std::vector<uint8_t> bytes = read_file_bytes(path);
    ASSERT_EQ(bytes.size(), 352u + 181u * 217u * 181u) << path;
    torch::Tensor raw = torch::from_blob(bytes.data() + 352, {1, 181, 217, 181}, torch::kUInt8);
    EXPECT_TRUE(torch::equal(read_nifti(path).data, raw.to(torch::kFloat32))) << path;
  }
  const double brain = mask.data.gt(0).to(torch::kFloat64).mean().item<double>();
  EXPECT_GT(brain, 0.1);
  EXPECT_LT(brain, 0.5);
}

}  // namespace
}  // namespace tandem::data
