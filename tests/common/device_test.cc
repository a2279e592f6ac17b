// --devices: counts and lists parse into named devices; malformed lists are refused with the
// value and a way out. Freed memory stays in the process for the next tensors.
#include "tandem/common/device.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <string>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace tandem {
namespace {

std::string error_of(const std::string& spec) {
  try {
    parse_devices(spec, 1);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ParseDevices, ACountGivesNumberedCpuDevices) {
  auto d = parse_devices("3", 2);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2].name, "cpu:2");
  EXPECT_TRUE(d[2].device.is_cpu());
  EXPECT_EQ(d[0].threads, 2);
}

TEST(ParseDevices, AListKeepsItsNames) {
  auto d = parse_devices("cpu:4,cpu:1", 1);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].name, "cpu:4");
  EXPECT_EQ(d[1].name, "cpu:1");
}

TEST(ParseDevices, RefusesMalformedLists) {
  EXPECT_NE(error_of("").find("Config::devices is empty"), std::string::npos);
  EXPECT_NE(error_of("cpu0").find("not of the form cpu:N or cuda:N"), std::string::npos);
  EXPECT_NE(error_of("tpu:0").find("device type 'tpu' in Config::devices = tpu:0 is unknown"),
            std::string::npos);
  EXPECT_NE(error_of("0").find("must be a count between 1 and 1024"), std::string::npos);
}

// Counts and indices too large for an int are refused with the option, not by the conversion.
TEST(ParseDevices, RefusesNumbersBeyondAnyDevice) {
  EXPECT_EQ(
      error_of("99999999999"),
      "Config::devices = 99999999999 must be a count between 1 and 1024 (or a list: cpu:0,cpu:1)");
  EXPECT_EQ(error_of("1025"),
            "Config::devices = 1025 must be a count between 1 and 1024 (or a list: cpu:0,cpu:1)");
  EXPECT_NE(error_of("cpu:0,cpu:99999999999")
                .find("device 'cpu:99999999999' in Config::devices = "
                      "cpu:0,cpu:99999999999 has an index beyond"),
            std::string::npos);
}

// A CPU device has a memory count of its own; two of one name could not be told apart in the
// result line and the report.
TEST(ParseDevices, RefusesACpuNameTwice) {
  const std::string e = error_of("cpu:0,cpu:1,cpu:0");
  EXPECT_NE(e.find("device 'cpu:0' appears twice in Config::devices = cpu:0,cpu:1,cpu:0"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("Config::devices = 3"), std::string::npos) << e;
}

TEST(ParseDevices, CudaNeedsAVisibleGpu) {
  if (torch::cuda::is_available()) {
    // Naming one GPU more than once is how its devices share it.
    EXPECT_EQ(parse_devices("cuda:0,cuda:0", 1).size(), 2u);
    EXPECT_NE(error_of("cuda:999").find("does not exist"), std::string::npos);
  } else {
    EXPECT_NE(error_of("cuda:0").find("needs CUDA"), std::string::npos);
  }
}

#ifdef __GLIBC__
// A block of 8 MiB (a 64³ activation of 8 channels) comes from the heap, not a mapping of its
// own, and its bytes stay with the process once freed, for the next block to take.
TEST(KeepFreedMemory, BlocksUnder32MiBStayInTheProcess) {
  ASSERT_TRUE(keep_freed_memory());
  const size_t mapped = mallinfo2().hblkhd;
  void* block = std::malloc(8 << 20);
  ASSERT_NE(block, nullptr);
  static_cast<char*>(block)[0] = 1;
  EXPECT_EQ(mallinfo2().hblkhd, mapped);
  const size_t kept = mallinfo2().fordblks;
  std::free(block);
  EXPECT_GE(mallinfo2().fordblks, kept + (8 << 20));
}
#endif

}  // namespace
}  // namespace tandem
