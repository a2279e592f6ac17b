#include "tandem/spatial/slabs.h"

#include <gtest/gtest.h>

#include "tandem/common/check.h"

namespace tandem::spatial {
namespace {

std::vector<int64_t> sizes(const std::vector<Slab>& slabs) {
  std::vector<int64_t> out;
  int64_t offset = 0;
  for (const Slab& s : slabs) {
    EXPECT_EQ(s.offset, offset) << "slabs are contiguous";
    offset += s.size;
    out.push_back(s.size);
  }
  return out;
}

TEST(Slabs, CutsIntoMultiplesAsEvenAsPossibleFirstOnesLarger) {
  EXPECT_EQ(sizes(split_extent(88, 4, 4)), (std::vector<int64_t>{24, 24, 20, 20}));
  EXPECT_EQ(sizes(split_extent(96, 2, 4)), (std::vector<int64_t>{48, 48}));
  EXPECT_EQ(sizes(split_extent(16, 3, 4)), (std::vector<int64_t>{8, 4, 4}));
  EXPECT_EQ(sizes(split_extent(8, 3, 1)), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(sizes(split_extent(7, 1, 7)), (std::vector<int64_t>{7}));
}

std::string error_of(int64_t extent, int parts, int64_t multiple) {
  try {
    split_extent(extent, parts, multiple);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Slabs, SaysWhichDepthsAndSlabCountsWork) {
  EXPECT_EQ(error_of(16, 8, 4),
            "8 slabs of at least 4 planes need a depth of at least 32, not 16: use a depth of at "
            "least 32 or at most 4 slabs");
  EXPECT_EQ(error_of(18, 2, 4),
            "a depth of 18 cannot be cut into slabs of a multiple of 4 planes: the depth must be "
            "a multiple of 4 (e.g. 20)");
  EXPECT_EQ(most_slabs(16, 4), 4);
  EXPECT_EQ(most_slabs(18, 4), 0);
}

TEST(Slabs, DescribesEachDevicesPlanes) {
  SlabLayout l{2, 96, split_extent(96, 2, 4)};
  EXPECT_EQ(l.describe(0), "planes 0:48 of 96");
  EXPECT_EQ(l.describe(1), "planes 48:96 of 96");
}

TEST(Slabs, TheHeaviestSlabHasTheLargestSizeAndTwoNeighboursWhereThereAreThree) {
  SlabLayout cut;
  cut.dim = 2;
  cut.extent = 88;
  cut.slabs = split_extent(88, 4, 4);  // 24, 24, 20, 20
  const HeaviestSlab h = heaviest_slab(cut);
  EXPECT_EQ(h.index, 1);
  EXPECT_EQ(sizes(h.layout.slabs), (std::vector<int64_t>{24, 24, 20, 20}));
  cut.extent = 20;
  cut.slabs = split_extent(20, 4, 4);  // 8, 4, 4, 4: the 8 planes move to slab 1
  EXPECT_EQ(sizes(heaviest_slab(cut).layout.slabs), (std::vector<int64_t>{4, 8, 4, 4}));
  cut.extent = 96;
  cut.slabs = split_extent(96, 2, 4);
  const HeaviestSlab two = heaviest_slab(cut);
  EXPECT_EQ(two.index, 0);
  EXPECT_EQ(sizes(two.layout.slabs), (std::vector<int64_t>{48, 48}));
}

}  // namespace
}  // namespace tandem::spatial
