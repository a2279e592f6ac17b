#include "trace/time_axis.h"

#include <gtest/gtest.h>

#include <vector>

namespace tandem::trace {
namespace {

TEST(TimeAxis, PicksTheLargestUnitAtLeastOne) {
  EXPECT_EQ(pick_unit(999).name, "µs");
  EXPECT_EQ(pick_unit(1000).name, "ms");
  EXPECT_EQ(pick_unit(2.5e6).name, "s");
  EXPECT_EQ(pick_unit(2.5e6).us, 1e6);
}

TEST(TimeAxis, NiceTicks) {
  EXPECT_EQ(nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(3, 97, 8), (std::vector<double>{10, 20, 30, 40, 50, 60, 70, 80, 90}));
  EXPECT_EQ(nice_ticks(0, 7000, 8),
            (std::vector<double>{0, 1000, 2000, 3000, 4000, 5000, 6000, 7000}));
  EXPECT_EQ(nice_ticks(5, 5), (std::vector<double>{5}));
}

TEST(TimeAxis, TickCountStaysNearTarget) {
  for (double range : {1.0, 3.0, 7.0, 13.0, 999.0, 12345.0}) {
    auto ticks = nice_ticks(0, range, 8);
    EXPECT_GE(ticks.size(), 5u) << range;
    EXPECT_LE(ticks.size(), 10u) << range;
  }
}

TEST(TimeAxis, FormatsWithoutTrailingZeros) {
  EXPECT_EQ(format_tick(2500, pick_unit(5000)), "2.5");
  EXPECT_EQ(format_tick(0.1 + 0.2, pick_unit(1)), "0.3");
  EXPECT_EQ(format_tick(3e6, pick_unit(3e6)), "3");
}

}  // namespace
}  // namespace tandem::trace
