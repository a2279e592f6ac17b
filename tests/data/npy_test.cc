// The npy reader on files numpy wrote (tests/data/make_fixtures.py, run here with Debian's
// python3 and numpy), each dtype and the malformed headers.
#include "tandem/data/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "expect_error.h"
#include "scratch.h"
#include "tandem/common/check.h"

namespace tandem::data {
namespace {

class Npy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::scratch_path("tandem_npy_");
    const std::string command = std::string(TANDEM_FIXTURE_PYTHON) + " " + TANDEM_SOURCE_DIR +
                                "/tests/data/make_fixtures.py npy " + dir_;
    ASSERT_EQ(std::system(command.c_str()), 0)
        << command << " failed: it needs python3-numpy (scripts/setup installs it)";
  }
  static std::string path(const std::string& name) { return dir_ + "/" + name + ".npy"; }
  static std::string dir_;
};
std::string Npy::dir_;

// The fixtures' base array: 0 .. 23 as [2,3,4].
torch::Tensor base() { return torch::arange(24, torch::kFloat64).view({2, 3, 4}); }

TEST_F(Npy, EachDtypeReadsExactly) {
  struct Case {
    const char* name;
    torch::ScalarType dtype;
    const char* descr;
    torch::Tensor expected;  // float64, exact in the dtype
  };
  const Case cases[] = {{"float32", torch::kFloat32, "<f4", base() * 0.25 - 3},
                        {"float64", torch::kFloat64, "<f8", base() * 0.125 + 1e-3},
                        {"uint8", torch::kUInt8, "|u1", base() * 10 + 5},
                        {"int64", torch::kInt64, "<i8", base() * 1000000007 - 5}};
  for (const Case& c : cases) {
    const NpyHeader h = read_npy_header(path(c.name));
    EXPECT_EQ(h.descr, c.descr);
    EXPECT_EQ(h.dtype, c.dtype);
    EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(h.data_offset, 128) << c.name;  // numpy pads the header to 64-byte alignment
    const torch::Tensor a = read_npy(path(c.name));
    EXPECT_EQ(a.scalar_type(), c.dtype) << c.name;
    EXPECT_TRUE(torch::equal(a, c.expected.to(c.dtype))) << c.name << "\n" << a;
  }
  // int64 beyond float precision: 23 * 1000000007 - 5 exactly.
  EXPECT_EQ(read_npy(path("int64"))[1][2][3].item<int64_t>(), int64_t{23} * 1000000007 - 5);
}

TEST_F(Npy, ShapesVersionsAndLongHeaders) {
  EXPECT_TRUE(torch::equal(read_npy(path("vector")), torch::arange(5, torch::kInt64)));
  const torch::Tensor scalar = read_npy(path("scalar"));
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<double>(), 2.5);
  EXPECT_EQ(read_npy(path("empty")).sizes(), (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(torch::equal(read_npy(path("version2")), base().to(torch::kFloat32)));
  // A header length of 182 (0xb6): its low byte must not be read as negative.
  const NpyHeader h = read_npy_header(path("long_header"));
  EXPECT_EQ(h.data_offset, 10 + 182);
  EXPECT_EQ(h.shape.size(), 23u);
  EXPECT_TRUE(
      torch::equal(read_npy(path("long_header")).view({2, 3, 4}), base().to(torch::kFloat32)));
}

TEST_F(Npy, ShapeTextIsNumpys) {
  EXPECT_EQ(npy_shape_text({3}), "(3,)");
  EXPECT_EQ(npy_shape_text({2, 4}), "(2, 4)");
  EXPECT_EQ(npy_shape_text({}), "()");
}

TEST_F(Npy, MalformedFilesNameTheFileAndTheProblem) {
  expect_error([] { read_npy(path("bad_magic")); }, {path("bad_magic"), "not a NumPy .npy file"});
  expect_error([] { read_npy(path("bad_version")); }, {path("bad_version"), "version 9.0"});
  expect_error([] { read_npy(path("bad_truncated")); },
               {path("bad_truncated"), "holds 219 bytes", "need 224", "truncated"});
  expect_error([] { read_npy(path("bad_longer")); },
               {path("bad_longer"), "holds 228 bytes", "longer than its array"});
  expect_error([] { read_npy_header(path("bad_int32")); },
               {path("bad_int32"), "dtype '<i4'", "astype"});
  expect_error([] { read_npy_header(path("bad_big_endian")); },
               {path("bad_big_endian"), "dtype '>f4'", "little-endian"});
  expect_error([] { read_npy_header(path("bad_fortran")); },
               {path("bad_fortran"), "Fortran", "ascontiguousarray"});
  expect_error([] { read_npy_header(path("bad_no_shape")); },
               {path("bad_no_shape"), "without 'shape'"});
  expect_error([] { read_npy_header(path("bad_syntax")); },
               {path("bad_syntax"), "malformed npy header", "expected a dimension"});
  expect_error([] { read_npy_header(path("bad_header_length")); },
               {path("bad_header_length"), "claims 60000 bytes"});
  expect_error([] { read_npy(path("missing")); }, {path("missing"), "cannot open"});
}

}  // namespace
}  // namespace tandem::data
