// Config's description names every field: the configuration the ranks of an MPI job agree on
// (Job::agree) covers every option.
#include "tandem/train/config.h"

#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

namespace tandem::train {
namespace {

TEST(Config, TheDescriptionChangesWithEveryField) {
  const std::vector<std::pair<const char*, std::function<void(Config&)>>> changes = {
      {"model", [](Config& c) { c.model = "unet3d"; }},
      {"loss", [](Config& c) { c.loss = "dice"; }},
      {"output", [](Config& c) { c.output = "y"; }},
      {"width", [](Config& c) { c.width = 7; }},
      {"blocks", [](Config& c) { c.blocks = 7; }},
      {"dropout", [](Config& c) { c.dropout = 0.5; }},
      {"convs", [](Config& c) { c.convs = 7; }},
      {"filters", [](Config& c) { c.filters = 7; }},
      {"levels", [](Config& c) { c.levels = 7; }},
      {"volume", [](Config& c) { c.volume = 7; }},
      {"bce", [](Config& c) { c.bce = true; }},
      {"train_samples", [](Config& c) { c.train_samples = 7; }},
      {"test_samples", [](Config& c) { c.test_samples = 7; }},
      {"classes", [](Config& c) { c.classes = 7; }},
      {"data", [](Config& c) { c.data = "spheres"; }},
      {"data_dir", [](Config& c) { c.data_dir = "d"; }},
      {"test_files", [](Config& c) { c.test_files = 7; }},
      {"normalize", [](Config& c) { c.normalize.mode = data::Normalize::kNone; }},
      {"normalize",
       [](Config& c) {
         c.normalize = {data::Normalize::kDataset, false, {1}, {2}};
       }},
      {"devices", [](Config& c) { c.devices = "7"; }},
      {"devices_given", [](Config& c) { c.devices_given = true; }},
      {"threads_per_device", [](Config& c) { c.threads_per_device = 7; }},
      {"lend_idle_cores", [](Config& c) { c.lend_idle_cores = true; }},
      {"balance",
       [](Config& c) {
         c.balance = {1, 2};
       }},
      {"partition", [](Config& c) { c.partition = "memory"; }},
      {"stages", [](Config& c) { c.stages = 7; }},
      {"spatial", [](Config& c) { c.spatial = 7; }},
      {"replicas", [](Config& c) { c.replicas = 7; }},
      {"transport", [](Config& c) { c.transport = "mpi"; }},
      {"mpi_cuda", [](Config& c) { c.mpi_cuda = "direct"; }},
      {"schedule", [](Config& c) { c.schedule = "gpipe"; }},
      {"microbatches", [](Config& c) { c.microbatches = 7; }},
      {"virtual_stages", [](Config& c) { c.virtual_stages = 7; }},
      {"recompute", [](Config& c) { c.recompute = true; }},
      {"device_memory", [](Config& c) { c.device_memory = 7; }},
      {"log_placement", [](Config& c) { c.log_placement = true; }},
      {"faults", [](Config& c) { c.faults = {"zero:grad=1"}; }},
      {"batch", [](Config& c) { c.batch = 7; }},
      {"epochs", [](Config& c) { c.epochs = 7; }},
      {"steps", [](Config& c) { c.steps = 7; }},
      {"optimizer", [](Config& c) { c.optimizer = "sgd"; }},
      {"lr", [](Config& c) { c.lr = 7; }},
      {"lr_schedule", [](Config& c) { c.lr_schedule = "constant"; }},
      {"momentum", [](Config& c) { c.momentum = 0.5; }},
      {"seed", [](Config& c) { c.seed = 7; }},
      {"eval_batch", [](Config& c) { c.eval_batch = 7; }},
      {"comm_timeout_s", [](Config& c) { c.comm_timeout_s = 7; }},
      {"progress", [](Config& c) { c.progress = "none"; }},
      {"save_dir", [](Config& c) { c.save_dir = "s"; }},
      {"save_every", [](Config& c) { c.save_every = 7; }},
      {"keep", [](Config& c) { c.keep = 7; }},
      {"resume", [](Config& c) { c.resume = "r"; }},
      {"overwrite", [](Config& c) { c.overwrite = true; }},
      {"init_from", [](Config& c) { c.init_from = "i"; }},
      {"eval_only", [](Config& c) { c.eval_only = true; }},
      {"plan_only", [](Config& c) { c.plan_only = true; }},
  };
  const std::string plain = describe(Config{});
  for (const auto& [field, change] : changes) {
    Config c;
    change(c);
    EXPECT_NE(describe(c), plain) << field;
    EXPECT_NE(describe(c).find(std::string(field) + "="), std::string::npos) << field;
  }
}

}  // namespace
}  // namespace tandem::train
