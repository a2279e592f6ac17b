#include "tandem/schedule/registry.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tandem/common/check.h"

namespace tandem::schedule {
namespace {

// A program's own schedule: GPipe with its backwards in descending order.
Schedule gpipe_descending(const Options& o) {
  Schedule s = gpipe(o.stages, o.microbatches);
  s.name = "gpipe-descending";
  for (auto& actions : s.device_actions)
    std::stable_sort(actions.begin(), actions.end(), [](const Action& a, const Action& b) {
      if (a.op != b.op) return a.op == Op::kForward;
      return a.op == Op::kForward ? a.microbatch < b.microbatch : a.microbatch > b.microbatch;
    });
  return s;
}

TEST(Registry, AProgramsOwnScheduleIsMadeByNameLikeTandemsOwn) {
  register_schedule({"gpipe-descending", "GPipe, backwards descending", 1, gpipe_descending});
  const std::vector<std::string> names = schedule_names();
  EXPECT_EQ(names.back(), "gpipe-descending");
  EXPECT_EQ(names.front(), "1f1b");  // tandem's own first
  Options o;
  o.stages = 3;
  o.microbatches = 4;
  const Schedule s = make("gpipe-descending", o);
  EXPECT_EQ(s, gpipe_descending(o));
  EXPECT_EQ(s.num_stages, 3);
  EXPECT_FALSE(places_own_stages("gpipe-descending"));
  EXPECT_EQ(stages_per_device("gpipe-descending", 1), 1);
  try {
    register_schedule({"gpipe-descending", "again", 1, gpipe_descending});
    ADD_FAILURE() << "a name registered twice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a schedule named 'gpipe-descending' exists already"),
              std::string::npos)
        << e.what();
  }
}

TEST(Registry, StagesPerDeviceComeFromTheEntry) {
  EXPECT_EQ(stages_per_device("1f1b", 3), 1);
  EXPECT_EQ(stages_per_device("interleaved", 3), 3);
  EXPECT_EQ(stages_per_device("zb-v", 1), 2);
  EXPECT_TRUE(places_own_stages("interleaved"));
  EXPECT_TRUE(places_own_stages("zb-v"));
  EXPECT_FALSE(places_own_stages("zb-h1"));
}

TEST(Registry, IncompleteKindsAreRefused) {
  EXPECT_THROW(register_schedule({"", "no name", 1, gpipe_descending}), Error);
  EXPECT_THROW(register_schedule({"no-generator", "none", 1, nullptr}), Error);
  EXPECT_THROW(register_schedule({"minus", "negative", -1, gpipe_descending}), Error);
}

}  // namespace
}  // namespace tandem::schedule
