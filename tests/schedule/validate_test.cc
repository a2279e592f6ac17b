#include "tandem/schedule/validate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "schedule/index.h"
#include "schedule/lower.h"
#include "schedule/replay.h"
#include "tandem/common/check.h"
#include "tandem/schedule/registry.h"

namespace tandem::schedule {
namespace {

// Expects validate() to throw, with every fragment in the message.
void expect_invalid(const Schedule& s, const StageGraph& g, std::vector<std::string> fragments) {
  try {
    validate(s, g);
    ADD_FAILURE() << "accepted:\n" << format_grid(s);
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& f : fragments) {
      EXPECT_NE(what.find(f), std::string::npos) << "missing '" << f << "' in:\n" << what;
    }
  }
}

void erase(Schedule* s, const char* text) {
  const Action a = parse_action(text);
  for (auto& row : s->device_actions) row.erase(std::remove(row.begin(), row.end(), a), row.end());
}

const StageGraph kChain2 = StageGraph::chain(2);

// Every generator's schedules pass, compute-only and lowered, over a range of sizes; and the
// acceptance is not vacuous: the same schedule with any one of its compute actions removed is
// refused as missing that action (except the only backward of a one-micro-batch, one-stage
// schedule: without it the schedule is a valid evaluation).
TEST(Validate, AcceptsTheBuiltInsAndRefusesEachWithOneActionLess) {
  int checked = 0;
  for (const std::string& name : schedule_names()) {
    for (int p = 1; p <= 4; ++p) {
      for (int m = 1; m <= 8; ++m) {
        Options o;
        o.stages = p;
        o.microbatches = m;
        o.virtual_stages = name == "interleaved" && m % p == 0 ? 2 : 1;
        const Schedule s = make(name, o);
        const StageGraph chain = StageGraph::chain(s.num_stages);
        EXPECT_NO_THROW(validate(s, chain)) << s;
        EXPECT_NO_THROW(validate(lower(s, chain), chain)) << s;
        ++checked;
        if (p > 3 || m > 3) continue;  // one removal per action of the small ones is enough
        int backwards = 0;
        for (const auto& row : s.device_actions)
          for (const Action& a : row) backwards += a.op != Op::kForward;
        for (int d = 0; d < s.num_devices; ++d) {
          for (size_t k = 0; k < s.device_actions[d].size(); ++k) {
            Schedule less = s;
            const Action gone = less.device_actions[d][k];
            if (gone.op != Op::kForward && backwards == 1) continue;
            less.device_actions[d].erase(less.device_actions[d].begin() + k);
            expect_invalid(less, chain, {"missing", to_string(gone)});
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(schedule_names().size()) * 4 * 8);  // a program's own too
}

TEST(Validate, RejectsMissingAction) {
  Schedule s = gpipe(2, 2);
  erase(&s, "1B0");
  expect_invalid(s, kChain2,
                 {"schedule 'gpipe' is invalid", "backward of stage 1 micro-batch 0", "1B0"});
  s = gpipe(2, 2);
  erase(&s, "0F1");
  expect_invalid(s, kChain2, {"0F1 is missing (stage 0 runs on d0)"});
}

TEST(Validate, RejectsDuplicateActionAndMarksTheSecond) {
  Schedule s = gpipe(2, 2);
  s.device_actions[0].push_back(parse_action("0F1"));
  expect_invalid(s, kChain2, {"0F1 appears 2 times", "0B1 [0F1]\n"});
}

TEST(Validate, RejectsActionOnWrongDevice) {
  Schedule s = gpipe(2, 2);
  erase(&s, "1F0");
  s.device_actions[0].insert(s.device_actions[0].begin() + 1, parse_action("1F0"));
  expect_invalid(s, kChain2, {"1F0 is on d0, but stage 1 runs on d1", "[1F0]"});
}

TEST(Validate, RejectsBackwardBeforeForward) {
  const Schedule s = parse_grid(
      "name=bad stages=2 microbatches=1 devices=2 stage_device=0,1\n"
      "d0 | 0B0 0F0\n"
      "d1 | 1F0 1B0\n");
  expect_invalid(s, kChain2, {"0B0 on d0 comes before 0F0, which it needs", "[0B0]"});
}

TEST(Validate, RejectsConsumerForwardBeforeProducerForwardOnOneDevice) {
  // Skip graph 0->{1,3}, 1->2, 2->3; stages 0,1 on d0 and 2,3 on d1.
  const StageGraph skip{4, {{1, 3}, {2}, {3}, {}}};
  const Schedule s = parse_grid(
      "name=bad stages=4 microbatches=1 devices=2 stage_device=0,0,1,1\n"
      "d0 | 0F0 1F0 1B0 0B0\n"
      "d1 | 3F0 2F0 3B0 2B0\n");
  expect_invalid(s, skip, {"3F0 on d1 comes before 2F0, which it needs", "[3F0]"});
}

TEST(Validate, RejectsConsumerForwardBeforeProducerForwardAcrossDevices) {
  // Interleaved placement: stages 0,2 on d0 and 1,3 on d1. 2F0 waits for 1F0, which waits for
  // 0F0, which d0 only reaches after 2F0.
  const Schedule s = parse_grid(
      "name=bad stages=4 microbatches=1 devices=2 stage_device=0,1,0,1\n"
      "d0 | 2F0 0F0 2B0 0B0\n"
      "d1 | 1F0 3F0 3B0 1B0\n");
  expect_invalid(s, StageGraph::chain(4),
                 {"cycle between devices", "d0 waits at 2F0 for 1F0 on d1",
                  "d1 waits at 1F0 for 0F0 on d0", "[2F0]"});
}

TEST(Validate, RejectsUnmatchedSend) {
  Schedule s = lower(gpipe(2, 2), kChain2);
  erase(&s, "1F1<0");
  expect_invalid(s, kChain2, {"0F1>1 has no matching 1F1<0 on d1", "[0F1>1]"});
}

TEST(Validate, RejectsUnmatchedRecv) {
  Schedule s = lower(gpipe(2, 2), kChain2);
  erase(&s, "1B1>0");
  expect_invalid(s, kChain2, {"0B1<1 has no matching 1B1>0 on d1", "[0B1<1]"});
}

TEST(Validate, RejectsMissingRecvBeforeRemoteInput) {
  Schedule s = lower(gpipe(2, 2), kChain2);
  erase(&s, "1F1<0");
  erase(&s, "0F1>1");
  expect_invalid(s, kChain2, {"1F1 on d1 needs what 0F1 on d0 produces, but no 1F1<0"});
}

TEST(Validate, RejectsMisplacedOrMisdirectedMessages) {
  // Send before the compute that produces it.
  expect_invalid(parse_grid("d0 | 0F0>1 0F0 0B0<1 0B0\nd1 | 1F0<0 1F0 1B0 1B0>0\n"), kChain2,
                 {"0F0>1 on d0 comes before 0F0, which produces what it sends"});
  // Recv after the compute that needs it (and so no recv before that compute).
  expect_invalid(parse_grid("d0 | 0F0 0F0>1 0B0<1 0B0\nd1 | 1F0 1F0<0 1B0 1B0>0\n"), kChain2,
                 {"1F0 on d1 needs what 0F0 on d0 produces, but no 1F0<0 comes before it"});
  // A message between stages that share a device.
  expect_invalid(parse_grid("name=x stages=2 microbatches=1 devices=1 stage_device=0,0\n"
                            "d0 | 0F0 0F0>1 1F0<0 1F0 1B0 0B0\n"),
                 kChain2, {"0F0>1: stages 0 and 1 are both on d0"});
  // A message along no edge of the graph.
  expect_invalid(parse_grid("d0 | 0F0 0F0>2\nd1 | 1F0<0 1F0\nd2 | 2F0<1 2F0<0 2F0\n"),
                 StageGraph::chain(3), {"0F0>2: stage 2 does not consume the outputs of stage 0"});
  // W never communicates.
  expect_invalid(parse_grid("d0 | 0F0 0I0 0W0>1\nd1 | 1F0 1I0 1W0\n"), kChain2,
                 {"0W0>1: W actions never send or receive"});
}

// 1F1B with 2 stages and 2 micro-batches, each device posting the sends of one compute before
// the receives of the next: fine when sends are buffered, a deadlock when they block (d0 sends
// 0F1 while d1 sends 1B0, and neither reaches its receive).
const char* kSendsFirst =
    "d0 | 0F0 0F0>1 0F1 0F1>1 0B0<1 0B0 0B1<1 0B1\n"
    "d1 | 1F0<0 1F0 1B0 1B0>0 1F1<0 1F1 1B1 1B1>0\n";

// The same, posting the receives of the next compute before the sends of the previous one:
// d0 waits for 1B0 before sending 0F1, d1 waits for 0F1 before sending 1B0. A cycle even when
// sends are buffered (Megatron-LM escapes it by posting both at once, non-blocking).
const char* kRecvsFirst =
    "d0 | 0F0 0F0>1 0F1 0B0<1 0F1>1 0B0 0B1<1 0B1\n"
    "d1 | 1F0<0 1F0 1B0 1F1<0 1B0>0 1F1 1B1 1B1>0\n";

TEST(Validate, RejectsOrderThatDeadlocksUnderBlockingSends) {
  expect_invalid(
      parse_grid(kSendsFirst), kChain2,
      {"deadlocks when every send blocks", "d0 is blocked at 0F1>1 until d1 reaches 1F1<0",
       "d1 is blocked at 1B0>0 until d0 reaches 0B0<1", "[0F1>1]"});
  expect_invalid(
      parse_grid(kRecvsFirst), kChain2,
      {"deadlocks when every send blocks", "d0 is blocked at 0B0<1 until d1 reaches 1B0>0",
       "d1 is blocked at 1F1<0 until d0 reaches 0F1>1", "[0B0<1]"});
}

TEST(Replay, SendsFirstRunsOnlyWithBufferedSends) {
  const Schedule s = parse_grid(kSendsFirst);
  const ScheduleIndex index(s, kChain2);
  EXPECT_TRUE(replay(s, index, Sends::kBuffered).empty());
  const std::vector<Stall> stalls = replay(s, index, Sends::kRendezvous);
  ASSERT_EQ(stalls.size(), 2u);
  EXPECT_EQ(stalls[0].device, 0);
  EXPECT_EQ(stalls[0].index, 3);
  EXPECT_EQ(stalls[0].waits_for, parse_action("1F1<0"));
  EXPECT_EQ(stalls[1].device, 1);
  EXPECT_EQ(stalls[1].waits_for, parse_action("0B0<1"));
}

TEST(Replay, RecvsFirstStallsEvenWithBufferedSends) {
  const Schedule s = parse_grid(kRecvsFirst);
  const ScheduleIndex index(s, kChain2);
  const std::vector<Stall> stalls = replay(s, index, Sends::kBuffered);
  ASSERT_EQ(stalls.size(), 2u);
  EXPECT_EQ(s.device_actions[0][stalls[0].index], parse_action("0B0<1"));
  EXPECT_EQ(s.device_actions[1][stalls[1].index], parse_action("1F1<0"));
}

TEST(Validate, RejectsMixedOrIncompleteSplitBackward) {
  Schedule s = zb_h1(2, 2);
  erase(&s, "1W1");
  expect_invalid(s, kChain2, {"1W1 is missing (1I1 is there)"});
  s = zb_h1(2, 2);
  s.device_actions[0].push_back(parse_action("0B1"));
  expect_invalid(s, kChain2, {"0B1 and 0I1 both present"});
  s = zb_h1(2, 2);
  erase(&s, "0I0");
  erase(&s, "0W0");
  expect_invalid(s, kChain2, {"backward of stage 0 micro-batch 0 is missing"});
}

TEST(Validate, RejectsWeightBeforeInput) {
  const Schedule s = parse_grid("d0 | 0F0 0W0 0I0\n");
  expect_invalid(s, StageGraph::chain(1), {"0W0 on d0 comes before 0I0, which it needs"});
}

TEST(Validate, RejectsShapeMismatches) {
  expect_invalid(gpipe(3, 2), kChain2, {"it has 3 stages but the stage graph has 2"});
  Schedule s = gpipe(2, 2);
  s.stage_device[1] = 5;
  expect_invalid(s, kChain2, {"stage 1 is placed on device 5, outside 0..1"});
  s = gpipe(2, 2);
  s.device_actions[1].push_back(parse_action("1F7"));
  expect_invalid(s, kChain2, {"1F7 names micro-batch 7, outside 0..1"});
  expect_invalid(gpipe(2, 2), StageGraph{2, {{0}, {}}}, {"stage 0 lists consumer 0"});
}

TEST(Validate, AcceptsMixedSplitAndWholeBackwardAcrossStages) {
  // Stage 1 splits its backward, stage 0 does not; 0B0 waits for 1I0.
  const Schedule s = parse_grid("d0 | 0F0 0F0>1 0B0<1 0B0\nd1 | 1F0<0 1F0 1I0 1I0>0 1W0\n");
  EXPECT_EQ(s.device_actions[0][2], parse_action("0B0<1"));
  EXPECT_NO_THROW(validate(s, kChain2));
  EXPECT_NO_THROW(validate(compute_only(s), kChain2));
}

}  // namespace
}  // namespace tandem::schedule
