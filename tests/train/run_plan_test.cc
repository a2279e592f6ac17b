// plan_run decides a run without building it: stages, slabs, the stage -> device map, the
// steps, the replica and the memory plan come out of a Config, a model and its data, with no
// pipeline, no threads and none of the run's tensors.
#include "tandem/train/run_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "error_of.h"
#include "scratch.h"
#include "tandem/common/check.h"
#include "tandem/data/idx.h"
#include "tandem/memory/bytes.h"
#include "tandem/train/catalog.h"

namespace tandem::train {
namespace {

struct Made {
  std::unique_ptr<Source> source;
  graph::Model model;
};

Made make(const Config& c) {
  Made m;
  m.source = make_source(c, model_needs(c));
  m.model = make_model(c, m.source->input_shape());
  return m;
}

RunPlan plan(const Config& c, const PlanPlace& place = {}) {
  const Made m = make(c);
  return plan_run(c, m.model, *m.source, place);
}

Config unet(int volume) {
  Config c;
  c.model = "unet3d";
  c.data = "spheres";
  c.levels = 2;
  c.filters = 2;
  c.dropout = 0;
  c.volume = volume;
  c.batch = 2;
  c.microbatches = 1;
  c.train_samples = 6;
  c.test_samples = 0;
  c.devices = "4";
  return c;
}

TEST(RunPlan, SlabsMakeGroupsOfDevices) {
  Config c = unet(16);
  c.spatial = 2;
  const RunPlan p = plan(c);
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(p.stages, 2);
  EXPECT_EQ(p.depth, 16);
  EXPECT_EQ(p.pipeline.slabs, 2);
  EXPECT_EQ(p.pipeline.slab_extent, 16);
  EXPECT_EQ(p.pipeline.devices.size(), 4u);
  EXPECT_EQ(p.stage_group, (std::vector<int>{0, 1}));
  EXPECT_TRUE(p.pipeline.stage_device.empty());
  EXPECT_EQ(p.partition.num_stages, 2);
  EXPECT_TRUE(p.planned.empty());  // --partition time without a budget: no memory plan
  EXPECT_TRUE(p.memory_plan.empty());
}

TEST(RunPlan, StagesBeyondTheDevicesGoRoundRobin) {
  Config c = unet(16);
  c.devices = "2";
  c.stages = 4;
  const RunPlan p = plan(c);
  EXPECT_EQ(p.stages, 4);
  EXPECT_EQ(p.pipeline.stage_device, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(p.stage_group, (std::vector<int>{0, 1, 0, 1}));
}

TEST(RunPlan, InterleavedPlacesItsOwnStages) {
  Config c = unet(16);
  c.devices = "2";
  c.schedule = "interleaved";
  c.virtual_stages = 2;
  c.microbatches = 2;
  const RunPlan p = plan(c);
  EXPECT_EQ(p.stages, 4);
  EXPECT_TRUE(p.pipeline.stage_device.empty());
  EXPECT_EQ(p.stage_group, (std::vector<int>{0, 1, 0, 1}));
}

// (The replica a process runs is the pipeline's: runtime::Pipeline::replica, from its transport.)
TEST(RunPlan, StepsAreDerivedOnce) {
  Config c = unet(16);
  c.devices = "2";
  c.epochs = 3;
  c.train_samples = 10;
  c.batch = 2;
  c.replicas = 2;
  PlanPlace place;
  place.per_rank = true;
  const RunPlan p = plan(c, place);
  EXPECT_EQ(p.global_batch, 4);
  EXPECT_EQ(p.steps_per_epoch, 2);
  EXPECT_EQ(p.total_steps, 6);
  c.steps = 5;
  EXPECT_EQ(plan(c, place).total_steps, 5);
}

TEST(RunPlan, RefusesWhatCannotRun) {
  Config c = unet(16);
  c.spatial = 3;
  EXPECT_NE(error_of([&] { plan(c); }).find("give a multiple of 3 devices"), std::string::npos);
  c = unet(16);
  c.batch = 8;
  c.microbatches = 1;
  EXPECT_NE(error_of([&] { plan(c); }).find("a global batch of 8 is larger than the 6"),
            std::string::npos);
  c.plan_only = true;  // a run that only plans takes no step
  EXPECT_EQ(error_of([&] { plan(c); }), "");
  c.plan_only = false;
  c.eval_only = true;  // nor does one that only evaluates
  EXPECT_EQ(error_of([&] { plan(c); }), "");
  c = unet(16);
  c.partition = PartitionBy::kFit;
  EXPECT_NE(error_of([&] { plan(c); }).find("give Config::device_memory"), std::string::npos);
  c = unet(16);
  c.optimizer = static_cast<OptimizerKind>(7);  // a value outside the enum, cast by a program
  EXPECT_NE(error_of([&] { plan(c); }).find("use adam or sgd"), std::string::npos);
  c = unet(16);
  c.schedule = "forward-only";  // registered, for evaluation: it has no backward
  EXPECT_NE(error_of([&] { plan(c); }).find("forward-only runs forwards only"), std::string::npos);
  c.eval_only = true;
  EXPECT_EQ(error_of([&] { plan(c); }), "");
  c = unet(16);
  c.devices = "4";
  c.stages = 2;
  EXPECT_NE(error_of([&] { plan(c); }).find("leaves devices idle"), std::string::npos);
}

// The default split balances each layer's measured time: the MLP's flatten, which takes no
// time and holds no parameters, joins the first dense layer (even parameter counts leave it
// alone on the first device); under a budget, among the splits that fit.
TEST(RunPlan, TheDefaultSplitBalancesMeasuredTime) {
  // The demo's MLP on 4 devices, on images of MNIST's shape.
  const std::string dir = tandem::testing::scratch_path("tandem_run_plan_", "images");
  std::filesystem::create_directories(dir);
  for (const char* prefix : {"train", "t10k"}) {
    data::write_idx(
        std::string(dir) + "/" + prefix + "-images-idx3-ubyte",
        torch::arange(64 * 28 * 28).remainder(251).view({64, 28, 28}).to(torch::kUInt8));
    data::write_idx(std::string(dir) + "/" + prefix + "-labels-idx1-ubyte",
                    torch::arange(64).remainder(10).to(torch::kUInt8));
  }
  Config c;
  c.data_dir = dir;
  c.batch = 64;
  ASSERT_EQ(c.partition, PartitionBy::kTime);
  const Made m = make(c);
  ASSERT_EQ(m.model.layers[0].name, "flatten");
  const RunPlan timed = plan_run(c, m.model, *m.source);
  EXPECT_EQ(timed.partition.num_stages, 4);
  EXPECT_GE(timed.partition.balance()[0], 2) << timed.partition.to_string(m.model);
  EXPECT_TRUE(timed.planned.empty());
  c.partition = PartitionBy::kParameters;
  EXPECT_EQ(plan_run(c, m.model, *m.source).partition.balance()[0], 1);
  c.partition = PartitionBy::kTime;
  c.device_memory = 64ull << 20;
  const RunPlan fitted = plan_run(c, m.model, *m.source);
  ASSERT_EQ(fitted.planned.size(), 4u);
  EXPECT_TRUE(fitted.fits);
  EXPECT_GE(fitted.partition.balance()[0], 2) << fitted.partition.to_string(m.model);
  // --balance wins over the default.
  c.device_memory = 0;
  c.balance = {1, 2, 2, 3};
  EXPECT_EQ(plan_run(c, m.model, *m.source).partition.balance(), (std::vector<int>{1, 2, 2, 3}));
}

TEST(RunPlan, MemoryPlanAndBudgetWithoutAPipeline) {
  Config c = unet(16);
  c.devices = "2";
  c.partition = PartitionBy::kMemory;
  const RunPlan roomy = plan(c);
  ASSERT_EQ(roomy.planned.size(), 2u);
  EXPECT_NE(roomy.memory_plan.find("planned: peak_bytes="), std::string::npos);
  EXPECT_TRUE(roomy.fits);
  // A budget below the plan: the verdict says so, and thinner slabs are offered.
  c.device_memory = static_cast<uint64_t>(std::max(roomy.planned[0], roomy.planned[1]) * 0.8);
  const RunPlan tight = plan(c);
  EXPECT_FALSE(tight.fits);
  EXPECT_NE(tight.memory_plan.find("warning: stage"), std::string::npos);
  EXPECT_NE(tight.memory_plan.find("Config::spatial = "), std::string::npos);
  // It names the smallest budget the split fits, and that budget fits.
  const std::string says = "this split fits Config::device_memory = ";
  const size_t at = tight.memory_plan.find(says);
  ASSERT_NE(at, std::string::npos) << tight.memory_plan;
  const std::string words = tight.memory_plan.substr(
      at + says.size(), tight.memory_plan.find(' ', at + says.size()) - at - says.size());
  Config enough = c;
  enough.device_memory = memory::parse_bytes(words);
  EXPECT_GE(static_cast<double>(enough.device_memory),
            std::max(tight.planned[0], tight.planned[1]));
  EXPECT_LT(static_cast<double>(enough.device_memory),
            std::max(tight.planned[0], tight.planned[1]) + 0.1 * 1024 * 1024);
  EXPECT_TRUE(plan(enough).fits) << words;
  // The budget is the run's own, except when it only plans.
  EXPECT_EQ(tight.pipeline.device_memory, c.device_memory);
  c.plan_only = true;
  EXPECT_EQ(plan(c).pipeline.device_memory, 0u);
}

// zb-v places two stages on each device, which runs them in turn: its budget's verdict reads
// each device's peak over its actions, less than the sum of its stages' peaks, and names the
// device group over the budget.
TEST(RunPlan, ADeviceOfSeveralStagesIsPlannedAsItRunsThem) {
  Config c = unet(16);
  c.devices = "2";
  c.schedule = "zb-v";
  c.microbatches = 2;
  c.partition = PartitionBy::kMemory;
  const RunPlan p = plan(c);
  ASSERT_EQ(p.planned.size(), 4u);
  ASSERT_EQ(p.group_planned.size(), 2u);
  for (int g = 0; g < 2; ++g) {
    double sum = 0;
    for (size_t s = 0; s < p.planned.size(); ++s)
      if (p.stage_group[s] == g) sum += p.planned[s];
    EXPECT_LT(p.group_planned[static_cast<size_t>(g)], sum) << "device group " << g;
    EXPECT_GT(p.group_planned[static_cast<size_t>(g)], 0.5 * sum) << "device group " << g;
  }
  c.device_memory = static_cast<uint64_t>(0.9 * std::max(p.group_planned[0], p.group_planned[1]));
  const RunPlan tight = plan(c);
  EXPECT_FALSE(tight.fits);
  EXPECT_NE(tight.memory_plan.find("warning: device group"), std::string::npos)
      << tight.memory_plan;
  c.device_memory = static_cast<uint64_t>(std::max(p.group_planned[0], p.group_planned[1])) + 1;
  EXPECT_TRUE(plan(c).fits) << "a budget the groups fit, below the sum of a group's stages";
}

}  // namespace
}  // namespace tandem::train
