#include "schedule/lower.h"

#include <gtest/gtest.h>

#include "schedule/held_messages.h"
#include "schedule/index.h"
#include "tandem/common/check.h"
#include "tandem/schedule/generators.h"
#include "tandem/schedule/validate.h"

namespace tandem::schedule {
namespace {

// A U-Net's stages: a chain, plus stage s feeding stage n-1-s (its mirror) when that is not
// already s+1. For n = 4: 0->{1,3}, 1->{2}, 2->{3}.
StageGraph unet(int n) {
  StageGraph g = StageGraph::chain(n);
  for (int s = 0; s < n; ++s) {
    if (n - 1 - s > s + 1) g.consumers[s].push_back(n - 1 - s);
  }
  return g;
}

std::vector<Schedule> built_ins() {
  std::vector<Schedule> all;
  for (int p : {1, 2, 3, 4}) {
    for (int m : {1, 2, 3, 5, 8}) {
      for (auto* one_per_device : {sequential, gpipe, one_f_one_b, forward_only, zb_h1, zb_v}) {
        all.push_back(one_per_device(p, m));
      }
      for (int v : {1, 2, 3}) {
        if (v == 1 || m % p == 0) all.push_back(interleaved(p, v, m));
      }
    }
  }
  return all;
}

TEST(Lower, UNetGraphHasTheSkipsOfTheBrief) {
  EXPECT_EQ(unet(4), (StageGraph{4, {{1, 3}, {2}, {3}, {}}}));
}

TEST(Lower, EveryBuiltInPassesValidateOnChainAndSkipGraphs) {
  int checked = 0;
  for (const Schedule& s : built_ins()) {
    for (const StageGraph& g : {StageGraph::chain(s.num_stages), unet(s.num_stages)}) {
      SCOPED_TRACE(format_grid(s) + "graph " + to_string(g));
      ASSERT_NO_THROW(validate(s, g));
      const Schedule lowered = lower(s, g);
      ASSERT_NO_THROW(validate(lowered, g));
      EXPECT_EQ(compute_only(lowered), s);
      EXPECT_EQ(lower(lowered, g), lowered);  // idempotent
      ++checked;
    }
  }
  // (4 p x 5 m x 6 one-stage-per-device generators + 38 interleaved) x 2 graphs.
  EXPECT_EQ(checked, (120 + 38) * 2);
}

// Every input from another device gets exactly one send and one recv, and nothing else does.
TEST(Lower, MessagesAreExactlyTheCrossDeviceInputs) {
  for (const Schedule& s : {one_f_one_b(4, 3), interleaved(2, 2, 4), zb_v(2, 3), zb_h1(3, 2)}) {
    const StageGraph g = unet(s.num_stages);
    const Schedule lowered = lower(s, g);
    const ScheduleIndex index(s, g);
    int expected = 0;
    for (const auto& row : s.device_actions) {
      for (const Action& a : row) {
        for (const Action& need : index.inputs(a)) {
          expected += index.device_of(need.stage) != index.device_of(a.stage);
        }
      }
    }
    int sends = 0, recvs = 0;
    for (const auto& row : lowered.device_actions) {
      for (const Action& a : row) {
        sends += a.kind == Kind::kSend;
        recvs += a.kind == Kind::kRecv;
        if (a.kind != Kind::kCompute) {
          EXPECT_NE(index.device_of(a.stage), index.device_of(a.peer)) << a;
        }
      }
    }
    EXPECT_EQ(sends, expected) << s.name;
    EXPECT_EQ(recvs, expected) << s.name;
  }
}

// A send sits right after its producer and a recv right before its consumer, unless another
// message holds it back (messages keep their order on each device).
TEST(Lower, SendsAreEagerAndRecvsLazy) {
  for (const Schedule& s : built_ins()) {
    const Schedule lowered = lower(s, unet(s.num_stages));
    for (const auto& row : lowered.device_actions) {
      for (std::size_t i = 0; i < row.size(); ++i) {
        if (row[i].kind == Kind::kSend) {
          ASSERT_GT(i, 0u);
          const Action& before = row[i - 1];
          EXPECT_TRUE(before.kind != Kind::kCompute || before == compute_of(row[i]))
              << row[i] << " follows " << before << " in\n"
              << lowered;
        }
        if (row[i].kind == Kind::kRecv) {
          ASSERT_LT(i + 1, row.size());
          const Action& after = row[i + 1];
          EXPECT_TRUE(after.kind != Kind::kCompute || after == compute_of(row[i]))
              << row[i] << " precedes " << after << " in\n"
              << lowered;
        }
      }
    }
  }
}

TEST(Lower, SkipsOnOneDeviceNeedNoMessages) {
  // zb-v puts stage s and 2p-1-s on one device: the U-Net skips stay local.
  const Schedule lowered = lower(zb_v(2, 1), unet(4));
  EXPECT_EQ(format_grid(lowered),
            "name=zb-v stages=4 microbatches=1 devices=2 stage_device=0,1,1,0\n"
            "d0 | 0F0 0F0>1 3F0<2 3F0 3I0 3I0>2 3W0 0I0<1 0I0 0W0\n"
            "d1 | 1F0<0 1F0 2F0 2F0>3 2I0<3 2I0 2W0 1I0 1I0>0 1W0\n");
}

TEST(Lower, ForwardOnlySendsOnlyForward) {
  const Schedule lowered = lower(forward_only(3, 2), StageGraph::chain(3));
  EXPECT_EQ(format_grid(lowered),
            "name=forward-only stages=3 microbatches=2 devices=3 stage_device=0,1,2\n"
            "d0 | 0F0 0F0>1 0F1 0F1>1\n"
            "d1 | 1F0<0 1F0 1F1<0 1F0>2 1F1 1F1>2\n"
            "d2 | 2F0<1 2F0 2F1<1 2F1\n");
}

// Under its reference costs with comm = 0, no recv delays a compute: the lowered schedule
// simulates to the same timeline as the compute-only one.
TEST(Lower, ReceivesNeverDelayTheReferenceTimeline) {
  for (const Schedule& s : built_ins()) {
    const StageGraph g = unet(s.num_stages);
    const Costs costs = Costs::uniform(s.num_stages, 1, 3);
    const Timeline plain = simulate(s, g, costs);
    const Timeline lowered = simulate(lower(s, g, costs), g, costs);
    EXPECT_EQ(lowered.makespan, plain.makespan) << format_grid(s);
    EXPECT_EQ(lowered.busy, plain.busy);
  }
}

// With comm > 0 the order stays safe; a recv may hold its device for part of comm.
TEST(Lower, OrdersByAReferenceWithCommunicationCost) {
  for (const Schedule& s : built_ins()) {
    const StageGraph g = unet(s.num_stages);
    Costs costs = Costs::uniform(s.num_stages, 1, 2);
    costs.comm = 0.25;
    const Schedule lowered = lower(s, g, costs);
    EXPECT_NO_THROW(validate(lowered, g));
    EXPECT_EQ(compute_only(lowered), s);
    EXPECT_GE(simulate(lowered, g, costs).makespan, simulate(s, g, costs).makespan);
  }
}

TEST(Lower, RejectsAnInvalidComputeOrderAndZeroReferenceCosts) {
  Schedule s = gpipe(2, 2);
  std::swap(s.device_actions[0][0], s.device_actions[0][3]);
  EXPECT_THROW(lower(s, StageGraph::chain(2)), Error);
  try {
    lower(gpipe(2, 2), StageGraph::chain(2), Costs::uniform(2, 0, 1));
    FAIL() << "accepted zero costs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0F0 costs 0"), std::string::npos) << e.what();
  }
}

// Inputs received before a backward whose forward comes after it: lower() orders a recv by
// its message, so under 1F1B the middle stages take the next input before their first
// backward. GPipe runs every forward first, and a schedule without recvs receives nothing.
TEST(Lower, CountsInputsReceivedAheadOfABackward) {
  auto each = [](int, int, Op) { return 1.0; };
  EXPECT_EQ(peak_received_ahead(lower(one_f_one_b(4, 4), StageGraph::chain(4)), each),
            (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(peak_received_ahead(one_f_one_b(4, 4), each), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(peak_received_ahead(lower(gpipe(4, 4), StageGraph::chain(4)), each),
            (std::vector<double>{0, 0, 0, 0}));
  // With a skip (stage 0 feeds stage 3 too), the skip's messages reach stage 3 earlier than
  // its chain input: two micro-batches' skips wait through one of its backwards. The other way,
  // stage 3's gradient for the skip reaches stage 0 before the chain's gradient from stage 1,
  // and the next micro-batch's one waits through stage 0's backward. Weighed by sender and
  // kind, so that a caller can count each message's bytes.
  const Schedule skips = lower(one_f_one_b(4, 4), unet(4));
  EXPECT_EQ(peak_received_ahead(skips, each), (std::vector<double>{1, 1, 1, 2}));
  EXPECT_EQ(peak_received_ahead(
                skips, [](int, int from, Op op) { return op != Op::kForward && from == 3; }),
            (std::vector<double>{1, 0, 0, 0}));
  const std::vector<double> from_stage0 =
      peak_received_ahead(skips, [](int, int from, Op) { return from == 0 ? 1.0 : 0.0; });
  EXPECT_EQ(from_stage0, (std::vector<double>{0, 1, 0, 2}));
  const std::vector<double> weighed =
      peak_received_ahead(skips, [](int, int from, Op) { return from == 0 ? 10.0 : 1.0; });
  EXPECT_EQ(weighed[3], 20.0);
  // Gradients sent and maybe not received yet, under any timing: stage 0 may stall right after
  // sending its last forward, before it receives the first gradient, while stage 1 runs its
  // remaining backwards. GPipe's stages all run their backwards after every forward.
  const StageGraph chain = StageGraph::chain(4);
  auto gradients = [](int, int, Op op) { return op == Op::kForward ? 0.0 : 1.0; };
  auto activations = [](int, int, Op op) { return op == Op::kForward ? 1.0 : 0.0; };
  EXPECT_EQ(peak_sent_unreceived(lower(one_f_one_b(4, 4), chain), chain, gradients),
            (std::vector<double>{0, 3, 2, 1}));
  EXPECT_EQ(peak_sent_unreceived(lower(gpipe(4, 4), chain), chain, gradients),
            (std::vector<double>{0, 3, 3, 3}));
  // A forward message is always received before the backward of its micro-batch can come
  // back, and later ones are received ahead of the receiver's backwards, not after.
  EXPECT_EQ(peak_sent_unreceived(lower(one_f_one_b(4, 4), chain), chain, activations),
            (std::vector<double>{0, 0, 0, 0}));
  // Never more than the micro-batches whose forward has not run.
  for (const Schedule& s : built_ins()) {
    const std::vector<double> ahead =
        peak_received_ahead(lower(s, StageGraph::chain(s.num_stages)), each);
    for (int st = 0; st < s.num_stages; ++st) {
      EXPECT_GE(ahead[st], 0);
      EXPECT_LT(ahead[st], std::max(1, s.num_microbatches)) << format_grid(s);
    }
    EXPECT_EQ(ahead[0], 0) << "the first stage reads the data, not a message";
  }
}

}  // namespace
}  // namespace tandem::schedule
