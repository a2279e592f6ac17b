#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "schedule/lower.h"
#include "tandem/common/check.h"
#include "tandem/schedule/registry.h"
#include "tandem/schedule/simulate.h"
#include "tandem/schedule/validate.h"

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

// The most half-size micro-batches a device holds over its two chunks, from F to W.
int device_peak_to_w(const Schedule& s) {
  int worst = 0;
  for (const auto& row : s.device_actions) {
    int now = 0;
    for (const Action& a : row) {
      if (a.op == Op::kForward) worst = std::max(worst, ++now);
      if (a.op == Op::kWeight) --now;
    }
  }
  return worst;
}

TEST(Generators, ZeroBubbleVHoldsOneFOneBsPeakPerDevice) {
  // Counted together over a device's two half-size chunks, from F to W: 2 min(p, m) chunk
  // micro-batches, the activations of min(p, m) full stages, 1F1B's peak.
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 4 * p; ++m) {
      EXPECT_EQ(device_peak_to_w(zb_v(p, m)), 2 * std::min(p, m)) << "p=" << p << " m=" << m;
    }
  }
}

TEST(Generators, CappedVHoldsNoMoreThanItsCap) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 3 * p + 2; ++m) {
      const std::string at = "p=" + std::to_string(p) + " m=" + std::to_string(m);
      const Schedule half = v_half(p, m), least = v_min(p, m);
      const StageGraph chain = StageGraph::chain(2 * p);
      EXPECT_NO_THROW(validate(half, chain)) << at;
      EXPECT_NO_THROW(validate(least, chain)) << at;
      EXPECT_NO_THROW(validate(lower(half, chain), chain)) << at;
      EXPECT_LE(device_peak_to_w(half), 2 * ((p + 2) / 2)) << at;
      EXPECT_LE(device_peak_to_w(least), 2 * ((p + 4) / 3)) << at;
      EXPECT_EQ(half.stage_device, zb_v(p, m).stage_device) << at;
      // Each stage runs its F, I and W in micro-batch order (the weight gradients add up in
      // the order of every other schedule).
      for (const Schedule* sched : {&half, &least}) {
        std::map<std::pair<int, char>, int> next;
        for (const auto& row : sched->device_actions) {
          for (const Action& a : row) {
            const std::pair<int, char> key(a.stage, static_cast<char>(a.op));
            EXPECT_EQ(a.microbatch, next[key]++) << at << " " << a;
          }
        }
      }
    }
  }
  // The cap is what bounds them: with 8 devices and 16 micro-batches zb-v holds 16.
  EXPECT_EQ(device_peak_to_w(zb_v(8, 16)), 16);
  EXPECT_EQ(device_peak_to_w(v_half(8, 16)), 10);
  EXPECT_EQ(device_peak_to_w(v_min(8, 16)), 8);
  EXPECT_THROW(v_capped("v-1", 4, 8, 1), Error);
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

// The golden grids below are not snapshots: each is worked out from its generator's rule (the
// comment above it, from the paper the rule follows), and each must also pass the validator
// once lowered and meet the simulator's bubble formula for its schedule (simulate_test.cc): a
// grid that was merely printed and pasted would have to be right on three counts.
void expect_valid_with_idle(const Schedule& s, const Costs& costs, double ideal, double idle) {
  const StageGraph chain = StageGraph::chain(s.num_stages);
  EXPECT_NO_THROW(validate(lower(s, chain), chain)) << s;
  const Timeline t = simulate(s, chain, costs);
  EXPECT_EQ(t.makespan - ideal, idle) << s << format_timeline(t, s.num_devices);
}

Costs split_costs(int stages) {  // F = I = W = 1
  Costs c;
  c.forward.assign(stages, 1);
  c.input.assign(stages, 1);
  c.weight.assign(stages, 1);
  return c;
}

// Megatron-LM's interleaved 1F1B, p = 2 devices, V = 2 chunks (device d: stages d and d + 2),
// m = 4. Forward visits micro-batches in rounds of p: 0,1 on chunk 0, then 0,1 on chunk 1, then
// 2,3 on chunk 0, ...; backward the same rounds with the chunks reversed (2B0 2B1 0B0 0B1 ...).
// Device d warms up with min(2(p-d-1) + (V-1)p, Vm) forwards: 4 on d0 (0F0 0F1 2F0 2F1), 2 on
// d1 (1F0 1F1); then it alternates the next forward and the next backward, and drains the
// backwards. With F = B = 1 per chunk each device computes 2Vm = 16 and idles 2(p-1) = 2,
// Megatron's bubble: 1F1B's divided by V.
TEST(Generators, InterleavedVisitsMicroBatchesInRoundsOfP) {
  const Schedule s = interleaved(2, 2, 4);
  EXPECT_EQ(format_grid(s),
            "name=interleaved stages=4 microbatches=4 devices=2 stage_device=0,1,0,1\n"
            "d0 | 0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3\n"
            "d1 | 1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3\n");
  expect_valid_with_idle(s, Costs::uniform(4), 16, 2);
}

// zb-h1 (Qi et al. 2023, "ZB-H1"), p = 3, m = 4. Stage s keeps 1F1B's order of F and I: n =
// min(p-s-1, m) warm-up forwards, then F(n+k) I(k) for k = 0.. (the F while one is left), and
// W(k) moves from right after I(k) to right after I(k+s):
//   s=0: n=2  F0 F1 | F2 I0 W0 | F3 I1 W1 | I2 W2 | I3 W3
//   s=1: n=1  F0 | F1 I0 | F2 I1 W0 | F3 I2 W1 | I3 W2 | W3
//   s=2: n=0  F0 I0 | F1 I1 | F2 I2 W0 | F3 I3 W1 | W2 W3
// With F = I = W = 1 and m >= p a device computes 3m = 12 and idles p-1 = 2: a third of 1F1B's
// 3(p-1).
TEST(Generators, ZeroBubbleH1GoldenGrid) {
  const Schedule s = zb_h1(3, 4);
  EXPECT_EQ(format_grid(s),
            "name=zb-h1 stages=3 microbatches=4 devices=3 stage_device=0,1,2\n"
            "d0 | 0F0 0F1 0F2 0I0 0W0 0F3 0I1 0W1 0I2 0W2 0I3 0W3\n"
            "d1 | 1F0 1F1 1I0 1F2 1I1 1W0 1F3 1I2 1W1 1I3 1W2 1W3\n"
            "d2 | 2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2W2 2W3\n");
  expect_valid_with_idle(s, split_costs(3), 12, 2);
}

// zb-v (Qi et al. 2024, "ZB-V", as PyTorch's ScheduleZBVZeroBubble builds it), p = 2, m = 3,
// counted for n = max(m, 2p-1) = 3 micro-batches (none dropped here). Device d holds chunk 0 =
// stage d and chunk 1 = stage 2p-1-d (d0: stages 0 and 3, d1: 1 and 2). Its list:
//   warm-up    2(p-d)-1 F0, then d times F1 F0, then p-d times F1 I1 W1
//   steady     while F1 lags F0 or F0 < n: [F0 while < n] I0 W0 F1 I1 W1
//   cool-down  d times I0 I1; p-d times I0 W0; the remaining W1; the remaining W0
// d0: 0F0 0F1 0F2 | - | 3F0 3I0 3W0 3F1 3I1 3W1 | 0I0 0W0 3F2 3I2 3W2 | - | 0I1 0W1 0I2 0W2
// d1: 1F0 | 2F0 1F1 | 2F1 2I0 2W0 | 1F2 1I0 1W0 2F2 2I1 2W1 | 1I1 2I2 | 1I2 1W1 | 2W2 | 1W2
// With F = I = W = 1 per chunk and m >= 2p-1 a device computes 6m = 18 and idles p-1 = 1 (1F1B
// on full stages idles 6(p-1)).
TEST(Generators, ZeroBubbleVGoldenGrid) {
  const Schedule s = zb_v(2, 3);
  EXPECT_EQ(format_grid(s),
            "name=zb-v stages=4 microbatches=3 devices=2 stage_device=0,1,1,0\n"
            "d0 | 0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 3F2 3I2 3W2 0I1 0W1 0I2 0W2\n"
            "d1 | 1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1I1 2I2 1I2 1W1 2W2 1W2\n");
  expect_valid_with_idle(s, split_costs(4), 18, 1);
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
    EXPECT_EQ(s.num_stages, name == "zb-v" || name == "v-half" || name == "v-min" ? 8 : 4);
  }
  EXPECT_EQ(make("gpipe", o), gpipe(4, 4));
  EXPECT_EQ(make("1f1b", o), one_f_one_b(4, 4));
  EXPECT_EQ(make("zb-v", o), zb_v(4, 4));
  o.virtual_stages = 2;
  EXPECT_EQ(make("interleaved", o), interleaved(4, 2, 4));
  EXPECT_EQ(make("interleaved", o).num_stages, 8);
  EXPECT_EQ(make("zb-v", o), zb_v(4, 4));
  const std::vector<std::string> names = schedule_names();  // tandem's own come first
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 9),
            (std::vector<std::string>{"1f1b", "forward-only", "gpipe", "interleaved", "sequential",
                                      "v-half", "v-min", "zb-h1", "zb-v"}));
}

TEST(Make, RejectsUnknownNamesAndImpossibleCombinations) {
  expect_error("pipedream", {4, 4, 1},
               "unknown schedule 'pipedream'; valid names: 1f1b, forward-only, gpipe, interleaved, "
               "sequential, v-half, v-min, zb-h1, zb-v.");
  expect_error("gpipe", {4, 0, 1}, "got microbatches=0");
  expect_error("1f1b", {0, 4, 1}, "got stages=0");
  expect_error("gpipe", {4, 4, 2},
               "2 virtual stages per device only apply to interleaved, v-half, v-min and zb-v");
  expect_error("interleaved", {4, 6, 2},
               "got 6 micro-batches on 4 devices (use Options::microbatches = 8 or 4)");
  expect_error("zb-v", {3, 4, 3}, "got 3 virtual stages (use Options::virtual_stages = 1 or 2)");
}

}  // namespace
}  // namespace tandem::schedule
