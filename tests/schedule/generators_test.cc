#include "tandem/schedule/generators.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tandem/common/check.h"

namespace tandem::schedule {
namespace {

// Walks stage s's device list: +1 at F(s,*), -1 when its backward ends (`ends` is B, or I/W).
int max_in_flight(const Schedule& s, int stage, Op ends) {
  int now = 0, peak = 0;
  for (const Action& a : s.device_actions[s.stage_device[stage]]) {
    if (a.stage != stage || a.kind != Kind::kCompute) continue;
    if (a.op == Op::kForward) peak = std::max(peak, ++now);
    if (a.op == ends) --now;
  }
  return peak;
}

TEST(Generators, OneFOneBHoldsAtMostPMinusSMicroBatchesOnStageS) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      const Schedule s = one_f_one_b(p, m);
      std::vector<int> expected;
      for (int stage = 0; stage < p; ++stage) {
        EXPECT_EQ(max_in_flight(s, stage, Op::kBackward), std::min(p - stage, m))
            << "p=" << p << " m=" << m << " stage=" << stage;
        expected.push_back(std::min(p - stage, m));
      }
      EXPECT_EQ(peak_in_flight(s), expected);
    }
  }
}

TEST(Generators, GpipeHoldsEveryMicroBatch) {
  for (int p = 1; p <= 4; ++p) {
    for (int m = 1; m <= 8; ++m) {
      for (int stage = 0; stage < p; ++stage) {
        EXPECT_EQ(max_in_flight(gpipe(p, m), stage, Op::kBackward), m);
      }
      EXPECT_EQ(peak_in_flight(gpipe(p, m)), std::vector<int>(p, m));
      EXPECT_EQ(peak_in_flight(sequential(p, m)), std::vector<int>(p, 1));
      EXPECT_EQ(peak_in_flight(forward_only(p, m)), std::vector<int>(p, 0));
    }
  }
}

// zb-h1 keeps 1F1B's F/I order (so activations until I are 1F1B's) and holds no stage above
// 1F1B's peak min(p, m) until W.
TEST(Generators, ZeroBubbleH1KeepsOneFOneBsPeak) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      const Schedule s = zb_h1(p, m);
      for (int stage = 0; stage < p; ++stage) {
        EXPECT_EQ(max_in_flight(s, stage, Op::kInput), std::min(p - stage, m));
        EXPECT_LE(max_in_flight(s, stage, Op::kWeight), std::min(p, m));
      }
      const std::vector<int> peaks = peak_in_flight(s);
      EXPECT_EQ(*std::max_element(peaks.begin(), peaks.end()), std::min(p, m));
    }
  }
}

TEST(Generators, ZeroBubbleVHoldsOneFOneBsPeakPerDevice) {
  // Counted together over a device's two half-size chunks, from F to W: 2 min(p, m) chunk
  // micro-batches, the activations of min(p, m) full stages, 1F1B's peak.
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 4 * p; ++m) {
      const Schedule s = zb_v(p, m);
      int worst = 0;
      for (const auto& row : s.device_actions) {
        int now = 0;
        for (const Action& a : row) {
          if (a.op == Op::kForward) worst = std::max(worst, ++now);
          if (a.op == Op::kWeight) --now;
        }
      }
      EXPECT_EQ(worst, 2 * std::min(p, m)) << "p=" << p << " m=" << m;
    }
  }
}

TEST(Generators, PlacementOfMultiStageSchedules) {
  const Schedule i = interleaved(3, 2, 6);
  EXPECT_EQ(i.num_stages, 6);
  EXPECT_EQ(i.num_devices, 3);
  EXPECT_EQ(i.stage_device, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  const Schedule v = zb_v(3, 4);
  EXPECT_EQ(v.num_stages, 6);
  EXPECT_EQ(v.num_devices, 3);
  EXPECT_EQ(v.stage_device, (std::vector<int>{0, 1, 2, 2, 1, 0}));
}

TEST(Generators, InterleavedWithOneChunkIsOneFOneB) {
  Schedule s = interleaved(4, 1, 6);
  EXPECT_EQ(s.name, "interleaved");
  s.name = "1f1b";
  EXPECT_EQ(s, one_f_one_b(4, 6));
}

TEST(Generators, InterleavedVisitsMicroBatchesInRoundsOfP) {
  EXPECT_EQ(format_grid(interleaved(2, 2, 4)),
            "name=interleaved stages=4 microbatches=4 devices=2 stage_device=0,1,0,1\n"
            "d0 | 0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3\n"
            "d1 | 1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3\n");
}

TEST(Generators, ZeroBubbleGoldenGrids) {
  EXPECT_EQ(format_grid(zb_h1(3, 4)),
            "name=zb-h1 stages=3 microbatches=4 devices=3 stage_device=0,1,2\n"
            "d0 | 0F0 0F1 0F2 0I0 0W0 0F3 0I1 0W1 0I2 0W2 0I3 0W3\n"
            "d1 | 1F0 1F1 1I0 1F2 1I1 1W0 1F3 1I2 1W1 1I3 1W2 1W3\n"
            "d2 | 2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2W2 2W3\n");
  EXPECT_EQ(format_grid(zb_v(2, 3)),
            "name=zb-v stages=4 microbatches=3 devices=2 stage_device=0,1,1,0\n"
            "d0 | 0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 3F2 3I2 3W2 0I1 0W1 0I2 0W2\n"
            "d1 | 1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1I1 2I2 1I2 1W1 2W2 1W2\n");
}

void expect_error(const std::string& name, Options o, const std::string& fragment) {
  try {
    make(name, o);
    ADD_FAILURE() << "accepted " << name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Make, BuildsEveryNamedSchedule) {
  Options o;
  o.stages = 4;
  o.microbatches = 4;
  for (const std::string& name : schedule_names()) {
    const Schedule s = make(name, o);
    EXPECT_EQ(s.name, name);
    EXPECT_EQ(s.num_devices, 4);  // interleaved and zb-v read `stages` as devices
    EXPECT_EQ(s.num_stages, name == "zb-v" ? 8 : 4);
  }
  EXPECT_EQ(make("gpipe", o), gpipe(4, 4));
  EXPECT_EQ(make("1f1b", o), one_f_one_b(4, 4));
  EXPECT_EQ(make("zb-v", o), zb_v(4, 4));
  o.virtual_stages = 2;
  EXPECT_EQ(make("interleaved", o), interleaved(4, 2, 4));
  EXPECT_EQ(make("interleaved", o).num_stages, 8);
  EXPECT_EQ(make("zb-v", o), zb_v(4, 4));
  EXPECT_EQ(schedule_names().size(), 7u);
}

TEST(Make, RejectsUnknownNamesAndImpossibleCombinations) {
  expect_error("pipedream", {4, 4, 1},
               "unknown schedule 'pipedream'; valid names: sequential, gpipe, 1f1b, interleaved, "
               "zb-h1, zb-v, forward-only.");
  expect_error("gpipe", {4, 0, 1}, "got microbatches=0");
  expect_error("1f1b", {0, 4, 1}, "got stages=0");
  expect_error("gpipe", {4, 4, 2},
               "2 virtual stages per device only apply to interleaved and zb-v");
  expect_error("interleaved", {4, 6, 2},
               "got 6 micro-batches on 4 devices (use --microbatches 8 or 4)");
  expect_error("zb-v", {3, 4, 3}, "got 3 virtual stages (use --virtual-stages 1 or 2)");
}

}  // namespace
}  // namespace tandem::schedule
