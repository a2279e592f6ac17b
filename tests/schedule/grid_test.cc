#include <gtest/gtest.h>

#include "schedule/lower.h"
#include "tandem/common/check.h"
#include "tandem/schedule/generators.h"
#include "tandem/schedule/schedule.h"

namespace tandem::schedule {
namespace {

// Golden grids: the generators' output, written out by hand from their definitions.
TEST(GoldenGrid, Gpipe2x4) {
  EXPECT_EQ(format_grid(gpipe(2, 4)),
            "name=gpipe stages=2 microbatches=4 devices=2 stage_device=0,1\n"
            "d0 | 0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3\n"
            "d1 | 1F0 1F1 1F2 1F3 1B0 1B1 1B2 1B3\n");
}

TEST(GoldenGrid, Gpipe4x8) {
  EXPECT_EQ(format_grid(gpipe(4, 8)),
            "name=gpipe stages=4 microbatches=8 devices=4 stage_device=0,1,2,3\n"
            "d0 | 0F0 0F1 0F2 0F3 0F4 0F5 0F6 0F7 0B0 0B1 0B2 0B3 0B4 0B5 0B6 0B7\n"
            "d1 | 1F0 1F1 1F2 1F3 1F4 1F5 1F6 1F7 1B0 1B1 1B2 1B3 1B4 1B5 1B6 1B7\n"
            "d2 | 2F0 2F1 2F2 2F3 2F4 2F5 2F6 2F7 2B0 2B1 2B2 2B3 2B4 2B5 2B6 2B7\n"
            "d3 | 3F0 3F1 3F2 3F3 3F4 3F5 3F6 3F7 3B0 3B1 3B2 3B3 3B4 3B5 3B6 3B7\n");
}

TEST(GoldenGrid, OneFOneB2x4) {
  EXPECT_EQ(format_grid(one_f_one_b(2, 4)),
            "name=1f1b stages=2 microbatches=4 devices=2 stage_device=0,1\n"
            "d0 | 0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3\n"
            "d1 | 1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3\n");
}

TEST(GoldenGrid, OneFOneB4x8) {
  EXPECT_EQ(format_grid(one_f_one_b(4, 8)),
            "name=1f1b stages=4 microbatches=8 devices=4 stage_device=0,1,2,3\n"
            "d0 | 0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 0B5 0B6 0B7\n"
            "d1 | 1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1F6 1B4 1F7 1B5 1B6 1B7\n"
            "d2 | 2F0 2F1 2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2F6 2B5 2F7 2B6 2B7\n"
            "d3 | 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7\n");
}

// The lowered order is part of the contract with the runtime (it must not deadlock), so pin it.
TEST(GoldenGrid, LoweredOneFOneB2x4) {
  EXPECT_EQ(format_grid(lower(one_f_one_b(2, 4), StageGraph::chain(2))),
            "name=1f1b stages=2 microbatches=4 devices=2 stage_device=0,1\n"
            "d0 | 0F0 0F0>1 0F1 0F1>1 0B0<1 0B0 0F2 0F2>1 0B1<1 0B1 0F3 0F3>1 0B2<1 0B2 0B3<1 "
            "0B3\n"
            "d1 | 1F0<0 1F0 1B0 1F1<0 1B0>0 1F1 1B1 1F2<0 1B1>0 1F2 1B2 1F3<0 1B2>0 1F3 1B3 "
            "1B3>0\n");
}

std::vector<Schedule> built_ins() {
  return {sequential(3, 2), gpipe(4, 8),          one_f_one_b(3, 5), forward_only(2, 3),
          zb_h1(4, 6),      interleaved(2, 3, 4), zb_v(3, 4)};
}

TEST(Grid, ParseInvertsFormatForComputeOnlySchedules) {
  for (const Schedule& s : built_ins()) {
    EXPECT_EQ(parse_grid(format_grid(s)), s) << format_grid(s);
  }
}

TEST(Grid, ParseInvertsFormatForLoweredSchedules) {
  for (const Schedule& s : built_ins()) {
    const Schedule lowered = lower(s, StageGraph::chain(s.num_stages));
    ASSERT_TRUE(is_lowered(lowered));
    EXPECT_EQ(parse_grid(format_grid(lowered)), lowered) << format_grid(lowered);
  }
}

TEST(Grid, RoundTripsEmptyRowsAndOddNames) {
  Schedule s = gpipe(2, 1);
  s.num_devices = 3;
  s.device_actions.push_back({});
  s.name = "";
  EXPECT_EQ(parse_grid(format_grid(s)), s);
  EXPECT_NE(format_grid(s).find("d2 |\n"), std::string::npos);
  s.name = "my schedule";
  EXPECT_EQ(parse_grid(format_grid(s)).name, "my_schedule");
}

TEST(Grid, MarksOneSlotWithACaret) {
  const Schedule s = gpipe(2, 2);
  const std::string grid = format_grid(s, &s.device_actions[1][1]);
  EXPECT_EQ(grid,
            "name=gpipe stages=2 microbatches=2 devices=2 stage_device=0,1\n"
            "d0 | 0F0 0F1 0B0 0B1\n"
            "d1 | 1F0 [1F1] 1B0 1B1\n"
            "         ^\n");
  // A marked grid still parses to the same schedule.
  EXPECT_EQ(parse_grid(grid), s);
}

TEST(Grid, MarksByValueWhenThePointerIsNotIntoTheSchedule) {
  const Schedule s = gpipe(2, 2);
  const Action a = parse_action("0B1");
  EXPECT_NE(format_grid(s, &a).find("d0 | 0F0 0F1 0B0 [0B1]\n                 ^\n"),
            std::string::npos)
      << format_grid(s, &a);
}

TEST(Grid, ParsesHandWrittenGridsWithoutHeader) {
  const Schedule s = parse_grid(
      "# two stages on one device, then stage 2 alone\n"
      "\n"
      "d0 | 0F0 1F0 1B0 0B0\n"
      "d1 |   2F0<1\n");
  EXPECT_EQ(s.name, "custom");
  EXPECT_EQ(s.num_devices, 2);
  EXPECT_EQ(s.num_stages, 3);
  EXPECT_EQ(s.num_microbatches, 1);
  EXPECT_EQ(s.stage_device, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(s.device_actions[1], (std::vector<Action>{parse_action("2F0<1")}));
}

void expect_parse_error(const std::string& text, const std::string& fragment) {
  try {
    parse_grid(text);
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Grid, ParseErrorsNameTheLineAndText) {
  expect_parse_error("d0 | 0F0 0X1\n", "grid line 1 ('d0 | 0F0 0X1'): cannot read action '0X1'");
  expect_parse_error("d0 | 0F0\nd2 | 2F0\n", "expected row 'd1', found 'd2'");
  expect_parse_error("name=x stages=1 microbatches=1 devices=2 stage_device=0\nd0 | 0F0\n",
                     "devices=2 but there are 1 rows");
  expect_parse_error("name=x stages=2 microbatches=1 devices=1 stage_device=0\nd0 | 0F0\n",
                     "stage_device lists 1 devices but stages=2");
  expect_parse_error("name=x stages=1 devices=1 stage_device=0\nd0 | 0F0\n", "lacks microbatches=");
  expect_parse_error("name=x color=red\n", "unknown header key 'color'");
  expect_parse_error("d0 | 1F0\n", "never runs stage 0");
  expect_parse_error("", "no rows");
}

TEST(Schedule, QueriesSplitAndLowered) {
  EXPECT_FALSE(splits_backward(one_f_one_b(2, 2)));
  EXPECT_TRUE(splits_backward(zb_h1(2, 2)));
  EXPECT_TRUE(splits_backward(zb_v(2, 2)));
  const Schedule lowered = lower(gpipe(2, 2), StageGraph::chain(2));
  EXPECT_TRUE(is_lowered(lowered));
  EXPECT_FALSE(is_lowered(gpipe(2, 2)));
  EXPECT_EQ(compute_only(lowered), gpipe(2, 2));
}

}  // namespace
}  // namespace tandem::schedule
