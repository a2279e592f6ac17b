// The planner's search and cost model on the catalog's mlp with hand-set layer times: step times
// against makespans computed by hand, the search against every split tried one by one.
#include "tandem/train/planner.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tandem/common/check.h"
#include "tandem/graph/partition.h"
#include "tandem/train/catalog.h"

namespace tandem::train {
namespace {

struct Fixture {
  Config config;
  graph::Model model;
  LayoutCosts costs;
};

// The mlp (8 layers) on 2 devices with a batch of `batch`; its bytes measured on a micro-batch
// of `micro` samples, and each layer's times set by `forward` (B = 2F, I = W = F).
Fixture mlp(int batch, int64_t micro, const std::function<double(int)>& forward) {
  Fixture f{Config{}, graph::Model{}, LayoutCosts{}};
  f.config.model = "mlp";
  f.config.width = 32;
  f.config.devices = "2";
  f.config.batch = batch;
  torch::manual_seed(0);
  f.model = make_model(f.config, {1, 28, 28});
  f.costs.micro = micro;
  f.costs.bytes =
      runtime::measure_layer_bytes(f.model, torch::randn({micro, 1, 28, 28}), 2, nullptr, 2);
  for (int l = 0; l < static_cast<int>(f.model.layers.size()); ++l) {
    f.costs.times.forward.push_back(forward(l));
    f.costs.times.backward.push_back(2 * forward(l));
    f.costs.times.input.push_back(forward(l));
    f.costs.times.weight.push_back(forward(l));
  }
  return f;
}

// `f`'s costs on 2 slabs: layer 0's forward and its backward each exchange once, sending
// `bytes`; no other layer exchanges.
LayoutCosts on_slabs(const Fixture& f, double bytes) {
  LayoutCosts slab = f.costs;
  slab.spatial = 2;
  const size_t n = f.model.layers.size();
  slab.times.forward_exchanges.assign(n, 0);
  slab.times.backward_exchanges.assign(n, 0);
  slab.times.forward_exchange_bytes.assign(n, 0.0);
  slab.times.backward_exchange_bytes.assign(n, 0.0);
  slab.times.forward_exchanges[0] = slab.times.backward_exchanges[0] = 1;
  slab.times.forward_exchange_bytes[0] = slab.times.backward_exchange_bytes[0] = bytes;
  return slab;
}

PlanSpace one(const std::string& schedule, int microbatches, bool recompute) {
  PlanSpace s;
  s.devices = 2;
  s.spatial = {1};
  s.microbatches = {microbatches};
  s.schedules = {schedule};
  s.recompute = {recompute};
  return s;
}

TEST(Planner, StepIsTheScheduleOnTheStagesTimes) {
  Fixture f = mlp(4, 2, [](int) { return 1.0; });
  ASSERT_EQ(f.model.layers.size(), 8u);
  f.config.balance = {4, 4};  // F = 4, B = 8 on each stage
  PlanCosts costs;
  costs.layouts = {f.costs};
  // GPipe, 2 stages, 2 micro-batches: (m + p - 1) (F + B) = 3 x 12.
  Planning p = plan_search(f.config, f.model, one("gpipe", 2, false), costs, 16);
  ASSERT_EQ(p.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, 36);
  EXPECT_DOUBLE_EQ(p.runs[0].samples_per_s, 4.0 / 36);
  EXPECT_EQ(p.runs[0].flags, "--schedule gpipe --microbatches 2 --recompute none --balance 4,4");
  // Recomputing runs each stage's forward again before its backward: 3 x (4 + 12).
  p = plan_search(f.config, f.model, one("gpipe", 2, true), costs, 16);
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, 48);
  // On one core the two devices take turns: the whole work, 2 stages x 2 micro-batches x 12.
  p = plan_search(f.config, f.model, one("gpipe", 2, false), costs, 1);
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, 48);
  // 1F1B, 2 stages, 4 micro-batches of 1 (their costs taken the same): as GPipe under equal
  // costs, (m + p - 1) (F + B) = 5 x 12; stage 1 waits for stage 0's forwards in between.
  LayoutCosts single = f.costs;
  single.micro = 1;
  costs.layouts.push_back(single);
  p = plan_search(f.config, f.model, one("1f1b", 4, false), costs, 16);
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, 60);
  // Costs of a layout that was not measured are refused.
  EXPECT_THROW(plan_search(f.config, f.model, one("1f1b", 1, false), costs, 16), Error);
}

// On shared cores the busy cores' speed follows the actions that run at each moment: an
// action slows while another runs beside it and speeds up again once that one ends.
TEST(Planner, SharedCoresSlowWhileBusy) {
  Fixture f = mlp(4, 2, [](int) { return 1.0; });
  f.config.balance = {4, 4};  // F = 4, B = 8 on each stage
  PlanCosts costs;
  costs.layouts = {f.costs};
  costs.core_efficiency = 0.5;  // both cores busy: each at half the speed of one alone
  // GPipe, 2 stages, 2 micro-batches, on 2 cores. Stage 0's first forward runs alone (0-4);
  // its second and stage 1's first run together at half speed (4-12); stage 1's second
  // forward (12-16) and first backward (16-24) alone; then the two devices' backwards together
  // (24-40); stage 0's last alone (40-48).
  Planning p = plan_search(f.config, f.model, one("gpipe", 2, false), costs, 2);
  ASSERT_EQ(p.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, 48);
  // With the cores at full speed together, the schedule's makespan: 3 x 12.
  costs.core_efficiency = 1;
  EXPECT_DOUBLE_EQ(
      plan_search(f.config, f.model, one("gpipe", 2, false), costs, 2).runs[0].step_seconds, 36);
  // Devices of 2 threads were measured on both cores: alone they run as measured, together
  // they share the cores, whatever the cores' efficiency. The same timeline as above.
  f.config.threads_per_device = 2;
  costs.core_efficiency = 0.7;
  EXPECT_DOUBLE_EQ(
      plan_search(f.config, f.model, one("gpipe", 2, false), costs, 2).runs[0].step_seconds, 48);
}

// A stage's forward takes the messages it receives (a wait and a copy of their bytes), its
// backward the gradients of what it sent; on slabs each layer takes its exchanges.
TEST(Planner, MessagesAndExchangesTakeTheirTransfer) {
  Fixture f = mlp(4, 2, [](int) { return 1.0; });
  f.config.balance = {4, 4};  // F = 4, B = 8 on each stage
  PlanCosts costs;
  costs.layouts = {f.costs};
  costs.transport.latency[2] = 0.5;
  costs.transport.copy = {{0.0, 0.0}, {1e6, 1.0}};  // 1e-6 s per byte
  const graph::Flow flow = graph::analyze(f.model, graph::partition_by_balance(f.model, {4, 4}));
  ASSERT_EQ(flow.inputs[1].size(), 1u);
  const double bytes = static_cast<double>(f.costs.bytes.tensors.at(flow.inputs[1][0].tensor));
  ASSERT_GT(bytes, 0);
  const double c = 0.5 + bytes * 1e-6;
  // GPipe, 2 micro-batches: stage 1's forwards take F + c, stage 0's backwards B + c. Stage 0
  // forwards at 0-4 and 4-8; stage 1 at 4-(8 + c) and (8 + c)-(12 + 2c), then backwards to
  // 20 + 2c and 28 + 2c; stage 0's backwards end at 28 + 3c and 36 + 4c.
  Planning p = plan_search(f.config, f.model, one("gpipe", 2, false), costs, 16);
  ASSERT_EQ(p.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, 36 + 4 * c);
  // Zero transport costs: the step of the compute alone.
  costs.transport = {};
  EXPECT_DOUBLE_EQ(
      plan_search(f.config, f.model, one("gpipe", 2, false), costs, 16).runs[0].step_seconds, 36);
  // One stage on a group of 2 slabs: layer 0's forward exchanges once (1000 bytes sent), its
  // backward once, each 0.5 + 1000 x 1e-3 = 1.5; GPipe's 2 micro-batches take 2 x (8 + 16 + 3).
  Config slabs = f.config;
  slabs.balance = {8};
  costs.layouts = {on_slabs(f, 1000)};
  costs.transport.latency[2] = 0.5;
  costs.transport.copy = {{0.0, 0.0}, {100.0, 0.1}, {200.0, 0.2}};  // 1e-3 s per byte
  PlanSpace space = one("gpipe", 2, false);
  space.spatial = {2};
  p = plan_search(slabs, f.model, space, costs, 16);
  ASSERT_EQ(p.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, 54);
  // The table says what the transport costs.
  EXPECT_NE(planning_table(p, slabs).find("an exchange waits 500000 us among 2; a receiver "
                                          "copies 100 B in 100000 us, 200 B in 200000 us"),
            std::string::npos)
      << planning_table(p, slabs);
}

// The split by time alone (beyond PlanSpace::every_split) weighs each layer's exchanges as the
// step does: it finds the exhaustive search's split when one layer's exchanges outweigh the rest.
TEST(Planner, SplitByTimeWeighsTheExchanges) {
  Fixture f = mlp(4, 2, [](int) { return 1.0; });
  PlanCosts costs;
  costs.layouts = {on_slabs(f, 0)};
  costs.transport.latency[2] = 10;  // layer 0 takes 23, each other 3
  PlanSpace space = one("gpipe", 2, false);
  space.devices = 4;  // 2 groups of 2 slabs: 2 stages
  space.spatial = {2};
  std::vector<std::vector<int>> balances;
  for (size_t every : {size_t{256}, size_t{0}}) {
    space.every_split = every;
    const Planning p = plan_search(f.config, f.model, space, costs, 16);
    ASSERT_NE(p.chosen(), nullptr);
    balances.push_back(p.chosen()->config.balance);
  }
  EXPECT_EQ(balances[0], (std::vector<int>{1, 7}));
  EXPECT_EQ(balances[1], balances[0]);
}

// A message's copy lies on the line between the measured sizes around it, beyond the last on
// the last two's; each message of an exchange waits once and copies its share.
TEST(Planner, TransportInterpolatesCopiesBetweenMeasuredSizes) {
  TransportCosts t;
  EXPECT_EQ(t.copy_seconds(1e9), 0.0);  // nothing measured
  t.copy = {{0.0, 0.0}, {100.0, 1.0}, {200.0, 5.0}};
  t.latency[4] = 2;
  EXPECT_DOUBLE_EQ(t.copy_seconds(50), 0.5);
  EXPECT_DOUBLE_EQ(t.copy_seconds(150), 3.0);
  EXPECT_DOUBLE_EQ(t.copy_seconds(300), 9.0);
  EXPECT_DOUBLE_EQ(t.seconds(4, 2, 300), 2 * (2 + 3.0));
  EXPECT_DOUBLE_EQ(t.seconds(2, 1, 100), 1.0);  // no wait measured among 2
  EXPECT_DOUBLE_EQ(t.seconds(4, 0, 0), 0.0);
}

// Under MPI each device sums its stages' weight gradients over the ranks of its group after its
// last action and before its optimizer; the sums take the measured time of their bytes.
TEST(Planner, GradientSumsFollowEachDevicesLastAction) {
  Fixture f = mlp(4, 2, [](int) { return 1.0; });
  f.config.balance = {4, 4};
  PlanCosts costs;
  costs.layouts = {f.costs};
  costs.transport.all_reduce[1] = {{0.0, 0.0}, {1e6, 1.0}};  // 1e-6 s per byte
  std::vector<double> bytes(2, 0.0);                         // of each stage's weights
  for (size_t l = 0; l < f.model.layers.size(); ++l)
    for (const auto& p : graph::named_parameters(f.model.layers[l]))
      bytes[l < 4 ? 0 : 1] += 4.0 * static_cast<double>(p.second.numel());
  ASSERT_GT(bytes[0], 0);
  ASSERT_GT(bytes[1], 0);
  // GPipe, 2 micro-batches: stage 1's last backward ends at 28, stage 0's at 36.
  Planning p = plan_search(f.config, f.model, one("gpipe", 2, false), costs, 16);
  ASSERT_EQ(p.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, std::max(36 + 1e-6 * bytes[0], 28 + 1e-6 * bytes[1]));
  // Sums measured for another --spatial cost this layout nothing.
  costs.transport.all_reduce = {{2, {{0.0, 0.0}, {1e6, 1.0}}}};
  EXPECT_DOUBLE_EQ(
      plan_search(f.config, f.model, one("gpipe", 2, false), costs, 16).runs[0].step_seconds, 36);
}

// Every device's weight gradients are zeroed before its first action: in process one thread
// zeroes every device's, one after another, before any starts; under MPI each rank its own.
TEST(Planner, GradientsAreZeroedBeforeTheFirstAction) {
  Fixture f = mlp(4, 2, [](int) { return 1.0; });
  f.config.balance = {4, 4};                               // F = 4, B = 8 on each stage
  f.costs.times.zero.assign(f.model.layers.size(), 0.25);  // 1 per stage
  PlanCosts costs;
  costs.layouts = {f.costs};
  // GPipe, 2 micro-batches: the makespan 3 x 12 after both devices' zeroing, 2.
  Planning p = plan_search(f.config, f.model, one("gpipe", 2, false), costs, 16);
  ASSERT_EQ(p.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, 38);
  // Each rank zeroes its own: stage 0 starts at 1, and stage 1 waits for its forward anyway.
  costs.in_process = false;
  EXPECT_DOUBLE_EQ(
      plan_search(f.config, f.model, one("gpipe", 2, false), costs, 16).runs[0].step_seconds, 37);
  // One stage on a group of 2 slabs, 2 x (8 + 16): in process each slab's copy of the
  // gradients is zeroed too, 2 x 2; under MPI each slab's rank zeroes its own at once, 2.
  Config slabs = f.config;
  slabs.balance = {8};
  costs.layouts = {on_slabs(f, 0)};
  PlanSpace space = one("gpipe", 2, false);
  space.spatial = {2};
  costs.in_process = true;
  EXPECT_DOUBLE_EQ(plan_search(slabs, f.model, space, costs, 16).runs[0].step_seconds, 52);
  costs.in_process = false;
  EXPECT_DOUBLE_EQ(plan_search(slabs, f.model, space, costs, 16).runs[0].step_seconds, 50);
}

// Rank 0's transport costs reach the other ranks as JSON, every number as it was.
TEST(Planner, TransportCostsRoundTripThroughJson) {
  TransportCosts t;
  t.where = "between 4 ranks over MPI";
  t.latency = {{2, 1.5e-5}, {4, 7.25e-5}};
  t.copy = {{0.0, 0.0}, {65536.0, 1.0 / 3}};
  t.all_reduce[2] = {{0.0, 0.0}, {1048576.0, 0.1}, {4194304.0, 0.7}};
  const TransportCosts back = transport_costs_from_json(transport_costs_json(t));
  EXPECT_EQ(back.where, t.where);
  EXPECT_EQ(back.latency, t.latency);
  EXPECT_EQ(back.copy, t.copy);
  EXPECT_EQ(back.all_reduce, t.all_reduce);
  EXPECT_DOUBLE_EQ(back.all_reduce_seconds(2, 2097152.0), 0.3);
  EXPECT_DOUBLE_EQ(back.all_reduce_seconds(1, 2097152.0), 0.0);
  EXPECT_THROW(transport_costs_from_json("{\"where\": 1}"), Error);
}

// Beyond the largest size measured a sum takes no less per byte than that size did: where the
// two largest took one time (a smaller size measured slower takes the larger's), a sum of four
// times the bytes takes four times the time, not the largest's.
TEST(Planner, GradientSumsBeyondTheLargestSizeGrowWithTheirBytes) {
  TransportCosts t;
  t.all_reduce[1] = {{0.0, 0.0}, {8e6, 0.02}, {16e6, 0.02}};
  EXPECT_DOUBLE_EQ(t.all_reduce_seconds(1, 12e6), 0.02);
  EXPECT_DOUBLE_EQ(t.all_reduce_seconds(1, 64e6), 0.08);
  t.all_reduce[1] = {{0.0, 0.0}, {8e6, 0.01}, {16e6, 0.03}};  // steeper than its rate: the line
  EXPECT_DOUBLE_EQ(t.all_reduce_seconds(1, 32e6), 0.07);
}

// The costs measured for a spatial split count each layer's exchanges with the other slabs, and
// the transport's are measured for the group's size; each layer's gradients' zeroing is
// measured.
TEST(Planner, MeasuredSlabsCountTheirExchanges) {
  Config c;
  c.model = "unet3d";
  c.levels = 2;
  c.filters = 2;
  c.data = "spheres";
  c.volume = 16;
  c.batch = 1;
  c.train_samples = 1;
  c.test_samples = 0;
  c.devices = "2";
  const std::unique_ptr<Source> source = make_source(c, model_needs(c));
  torch::manual_seed(0);
  const graph::Model model = make_model(c, source->input_shape());
  PlanSpace space;
  space.devices = 2;
  space.spatial = {1, 2};
  space.microbatches = {1};
  space.schedules = {"gpipe"};
  space.recompute = {false};
  const PlanCosts costs = measure_plan_costs(c, model, *source, space, 1);
  EXPECT_TRUE(costs.of(1, 1).times.forward_exchanges.empty());
  const runtime::LayerTimes& t = costs.of(2, 1).times;
  ASSERT_EQ(t.forward_exchanges.size(), model.layers.size());
  int forward = 0, backward = 0;
  double forward_bytes = 0;
  for (size_t l = 0; l < model.layers.size(); ++l) {
    forward += t.forward_exchanges[l];
    backward += t.backward_exchanges[l];
    forward_bytes += t.forward_exchange_bytes[l];
    EXPECT_EQ(t.forward_exchanges[l] > 0, t.forward_exchange_bytes[l] > 0) << "layer " << l;
  }
  // Every 3x3x3 convolution exchanges a halo each way; its backward returns the halo's gradient.
  EXPECT_GE(forward, 4);
  EXPECT_GE(backward, 4);
  // Each at least a plane of 16 x 16 voxels of one channel in fp32.
  EXPECT_GE(forward_bytes, forward * 16.0 * 16 * 4);
  ASSERT_EQ(costs.transport.latency.count(2), 1u);
  EXPECT_GT(costs.transport.latency.at(2), 0);
  ASSERT_EQ(costs.transport.copy.size(), 6u);
  EXPECT_GT(costs.transport.copy.back().second, 0);
  // Zeroing a layer's gradients takes time where it has weights, none where it has none.
  EXPECT_TRUE(costs.in_process);
  ASSERT_EQ(t.zero.size(), model.layers.size());
  for (size_t l = 0; l < model.layers.size(); ++l)
    EXPECT_EQ(t.zero[l] > 0, !graph::named_parameters(model.layers[l]).empty())
        << model.layers[l].name;
}

// Each precision of the space is planned on its own layout's costs, and the flags say it.
TEST(Planner, PlansEachPrecisionOnItsOwnCosts) {
  Fixture f = mlp(4, 2, [](int) { return 1.0; });
  f.config.balance = {4, 4};
  LayoutCosts bf16 = f.costs;
  bf16.precision = Precision::kBf16;
  for (auto* times :
       {&bf16.times.forward, &bf16.times.backward, &bf16.times.input, &bf16.times.weight})
    for (double& t : *times) t /= 2;
  PlanCosts costs;
  costs.layouts = {f.costs, bf16};
  PlanSpace space = one("gpipe", 2, false);
  space.precisions = {Precision::kFp32, Precision::kBf16};
  const Planning p = plan_search(f.config, f.model, space, costs, 16);
  ASSERT_EQ(p.runs.size(), 2u);
  EXPECT_EQ(p.runs[0].config.precision, Precision::kBf16) << "half the time: first";
  EXPECT_DOUBLE_EQ(p.runs[0].step_seconds, 18);
  EXPECT_EQ(p.runs[0].flags,
            "--schedule gpipe --microbatches 2 --recompute none --balance 4,4 --precision bf16");
  EXPECT_EQ(p.runs[1].config.precision, Precision::kFp32);
  EXPECT_DOUBLE_EQ(p.runs[1].step_seconds, 36);
  // A precision whose costs were not measured is refused.
  costs.layouts = {f.costs};
  EXPECT_THROW(plan_search(f.config, f.model, space, costs, 16), Error);
}

TEST(Planner, SearchFindsTheBestOfEverySplit) {
  // Uneven layers, so the split matters; the budget rules out the fastest splits.
  auto forward = [](int l) { return 1.0 + (l * 7 % 5); };
  for (size_t every : {size_t{256}, size_t{0}}) {
    Fixture f = mlp(2, 1, forward);
    PlanCosts costs;
    costs.layouts = {f.costs};
    PlanSpace space;
    space.devices = 2;
    space.spatial = {1};
    space.microbatches = {2};
    space.schedules = {"1f1b", "gpipe", "zb-h1", "sequential"};
    space.recompute = {false, true};
    space.every_split = every;
    const Planning free = plan_search(f.config, f.model, space, costs, 16);
    ASSERT_NE(free.chosen(), nullptr);
    // A budget just under the unbudgeted choice's peak.
    f.config.device_memory = static_cast<uint64_t>(free.chosen()->peak) - 1;
    const Planning held = plan_search(f.config, f.model, space, costs, 16);
    // Every split given as --balance, planned alone: the best that fits.
    double best = 0;
    for (int k = 1; k < 8; ++k) {
      Config given = f.config;
      given.balance = {k, 8 - k};
      for (const PlannedRun& r : plan_search(given, f.model, space, costs, 16).runs)
        if (r.fits) best = std::max(best, r.samples_per_s);
    }
    ASSERT_GT(best, 0);
    ASSERT_NE(held.chosen(), nullptr) << "every_split " << every;
    EXPECT_LE(held.chosen()->peak, static_cast<double>(f.config.device_memory));
    EXPECT_DOUBLE_EQ(held.chosen()->samples_per_s, best) << "every_split " << every;
  }
}

TEST(Planner, NothingFitsABudgetTooSmall) {
  Fixture f = mlp(2, 1, [](int) { return 1.0; });
  PlanCosts costs;
  costs.layouts = {f.costs};
  f.config.device_memory = 1024;
  const Planning p = plan_search(f.config, f.model, one("1f1b", 2, false), costs, 16);
  EXPECT_EQ(p.chosen(), nullptr);
  ASSERT_EQ(p.runs.size(), 1u);
  EXPECT_FALSE(p.runs[0].fits);
  EXPECT_GT(p.runs[0].peak, 1024);
}

TEST(Planner, JsonListsEveryConfigurationAndTheChoice) {
  Fixture f = mlp(2, 1, [](int l) { return 1.0 + l; });
  PlanCosts costs;
  costs.layouts = {f.costs};
  PlanSpace space = one("1f1b", 2, false);
  space.schedules = {"1f1b", "interleaved"};
  const Planning p = plan_search(f.config, f.model, space, costs, 16);
  const nlohmann::json j = nlohmann::json::parse(planning_json(p, f.config));
  ASSERT_EQ(j.at("configurations").size(), p.runs.size());
  EXPECT_EQ(j.at("chosen"), command_line(p.chosen()->config));
  EXPECT_NE(command_line(p.chosen()->config).find("--balance"), std::string::npos);
  const std::string table = planning_table(p, f.config);
  EXPECT_NE(table.find("chosen: tandem train --width 32 --devices 2"), std::string::npos) << table;
}

// The chosen command line says the schedule, the micro-batch count and the recomputation even
// where they are the defaults, and no other option at its default.
TEST(Planner, TheChosenCommandLineSaysWhatThePlannerDecided) {
  const Config defaults;
  EXPECT_EQ(command_line(defaults), fmt::format("tandem train --schedule {} --microbatches {} "
                                                "--recompute none",
                                                defaults.schedule, defaults.microbatches));
  Config c;
  c.schedule = "zb-h1";
  c.microbatches = 4;
  c.recompute = true;
  c.balance = {2, 3};
  EXPECT_EQ(command_line(c, 2),
            "mpirun -n 2 tandem train --balance 2,3 --schedule zb-h1 --microbatches 4 "
            "--recompute stage");
}

}  // namespace
}  // namespace tandem::train
