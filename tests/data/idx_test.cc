#include "tandem/data/idx.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "data/file_bytes.h"
#include "expect_error.h"
#include "scratch.h"
#include "tandem/common/check.h"

namespace tandem::data {
namespace {

std::string temp_path(const std::string& name) {
  return testing::scratch_path("tandem_idx_", name);
}

class IdxRoundTrip : public ::testing::TestWithParam<std::tuple<torch::ScalarType, bool>> {};

TEST_P(IdxRoundTrip, ValuesShapeAndDtypeSurvive) {
  const auto [dtype, gzip] = GetParam();
  // Values chosen to exercise sign and every byte of multi-byte types.
  const torch::Tensor i = torch::arange(2 * 3 * 5, torch::kFloat64).view({2, 3, 5});  // 0..29
  torch::Tensor a = i * 8;                                    // uint8: 0..232
  if (dtype == torch::kInt8) a = i * 7 - 100;                 // -100..103
  if (dtype == torch::kInt16) a = i * 1000 - 15000;           // both bytes vary
  if (dtype == torch::kInt32) a = i * 70000000 - 1000000000;  // all four bytes vary
  if (dtype == torch::kFloat32 || dtype == torch::kFloat64) a = (i - 10) / 7.0;
  a = a.to(dtype);
  const std::string path =
      temp_path(std::string("rt_") + c10::toString(dtype) + (gzip ? ".gz" : ""));
  write_idx(path, a, gzip);
  EXPECT_EQ(is_gzip_file(path), gzip);
  torch::Tensor b = read_idx(path);
  EXPECT_EQ(b.scalar_type(), dtype);
  EXPECT_EQ(b.sizes(), a.sizes());
  EXPECT_TRUE(torch::equal(a, b));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, IdxRoundTrip,
                         ::testing::Combine(::testing::Values(torch::kUInt8, torch::kInt8,
                                                              torch::kInt16, torch::kInt32,
                                                              torch::kFloat32, torch::kFloat64),
                                            ::testing::Bool()));

TEST(Idx, BigEndianOnDisk) {
  const std::string path = temp_path("be.idx");
  write_idx(path, torch::tensor({int32_t{0x01020304}}, torch::kInt32));
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  const std::vector<uint8_t> expected = {0, 0, 0x0c, 1, 0, 0, 0, 1, 1, 2, 3, 4};
  EXPECT_EQ(bytes, expected);
}

TEST(Idx, BadMagicNamesFile) {
  const std::string path = temp_path("bad_magic");
  write_file_bytes(path, {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 0}, false);
  expect_error([&] { read_idx(path); }, {path, "bad magic", "12 34 08 01"});
}

TEST(Idx, UnknownTypeCodeNamesCode) {
  const std::string path = temp_path("bad_type");
  write_file_bytes(path, {0, 0, 0x0a, 0x01, 0, 0, 0, 0}, false);
  expect_error([&] { read_idx(path); }, {path, "0x0a"});
}

TEST(Idx, TruncatedDataGivesBothSizes) {
  const std::string path = temp_path("truncated");
  write_idx(path, torch::zeros({10, 4}, torch::kUInt8));
  std::vector<uint8_t> bytes = read_file_bytes(path);
  bytes.resize(bytes.size() - 3);  // 12 header + 40 data -> 49
  write_file_bytes(path, bytes, true);
  expect_error([&] { read_idx(path); }, {path, "truncated", "52", "49"});
}

TEST(Idx, DimsFromTheHeaderAloneOfPlainAndGzipFiles) {
  for (bool gzip : {false, true}) {
    const std::string path = temp_path(gzip ? "dims_gz" : "dims");
    write_idx(path, torch::zeros({7, 4, 3}, torch::kUInt8), gzip);
    // Cut the data short: the header still answers, the whole read refuses.
    std::vector<uint8_t> bytes = read_file_bytes(path);
    bytes.resize(16 + 10);
    write_file_bytes(path, bytes, gzip);
    EXPECT_EQ(read_idx_dims(path), (std::vector<int64_t>{7, 4, 3})) << path;
    expect_error([&] { read_idx(path); }, {path, "truncated"});
  }
  const std::string bad = temp_path("dims_bad");
  write_file_bytes(bad, {0, 0, 0x08, 3, 0, 0, 0, 5}, false);
  expect_error([&] { read_idx_dims(bad); }, {bad, "truncated", "16 bytes"});
  expect_error([&] { read_idx_dims(temp_path("dims_missing")); }, {"dims_missing"});
}

TEST(Idx, TruncatedHeader) {
  const std::string path = temp_path("truncated_header");
  write_file_bytes(path, {0, 0, 0x08, 3, 0, 0, 0, 5}, false);
  expect_error([&] { read_idx(path); }, {path, "truncated", "16 bytes"});
}

TEST(Idx, TrailingBytesRejected) {
  const std::string path = temp_path("trailing");
  write_idx(path, torch::zeros({3}, torch::kUInt8));
  std::vector<uint8_t> bytes = read_file_bytes(path);
  bytes.push_back(9);
  write_file_bytes(path, bytes, false);
  expect_error([&] { read_idx(path); }, {path, "1 bytes after the data"});
}

TEST(Idx, MissingFile) {
  const std::string path = temp_path("missing");
  expect_error([&] { read_idx(path); }, {path});
}

}  // namespace
}  // namespace tandem::data
