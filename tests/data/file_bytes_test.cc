#include "data/file_bytes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "expect_error.h"
#include "scratch.h"
#include "tandem/common/check.h"

namespace tandem::data {
namespace {

std::string temp_path(const std::string& name) {
  return testing::scratch_path("tandem_file_bytes_", name);
}

std::vector<uint8_t> some_bytes(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 131 + 7) % 251);
  return b;
}

// The bytes on disk, without decompression.
std::vector<uint8_t> raw_bytes(const std::string& path) {
  std::vector<uint8_t> out;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  int c;
  while ((c = std::fgetc(f)) != EOF) out.push_back(static_cast<uint8_t>(c));
  std::fclose(f);
  return out;
}

TEST(FileBytes, PlainRoundTrip) {
  const std::string path = temp_path("plain.bin");
  const auto bytes = some_bytes(100000);
  write_file_bytes(path, bytes, false);
  EXPECT_FALSE(is_gzip_file(path));
  EXPECT_EQ(read_file_bytes(path), bytes);
}

TEST(FileBytes, GzipDetectedByMagicNotName) {
  const std::string path = temp_path("compressed_but_named.bin");
  const auto bytes = some_bytes(300000);
  write_file_bytes(path, bytes, true);
  EXPECT_TRUE(is_gzip_file(path));
  EXPECT_EQ(read_file_bytes(path), bytes);
  const std::vector<uint8_t> on_disk = raw_bytes(path);
  ASSERT_GE(on_disk.size(), 2u);
  EXPECT_EQ(on_disk[0], 0x1f);
  EXPECT_LT(on_disk.size(), bytes.size());  // really compressed
}

TEST(FileBytes, MissingFileNamesPath) {
  const std::string path = temp_path("does_not_exist");
  expect_error([&] { read_file_bytes(path); }, {path, "cannot open"});
}

TEST(FileBytes, TruncatedGzipIsAnError) {
  const std::string path = temp_path("truncated.gz");
  write_file_bytes(path, some_bytes(200000), true);
  std::vector<uint8_t> gz = raw_bytes(path);
  ASSERT_GT(gz.size(), 100u);
  gz.resize(gz.size() / 2);
  write_file_bytes(path, gz, false);
  expect_error([&] { read_file_bytes(path); }, {path, "truncated"});
}

}  // namespace
}  // namespace tandem::data
