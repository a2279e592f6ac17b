#include <cstdio>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "tandem/train/trainer.h"

namespace tandem::cli {

namespace {
std::vector<int> parse_int_list(const std::string& text, const char* option) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    TANDEM_CHECK(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos,
                 "{} {}: '{}' is not a positive integer; give a list like 3,4,3", option, text, item);
    out.push_back(std::stoi(item));
  }
  return out;
}

struct TrainArgs {
  train::Config config;
  std::string balance;
};
}  // namespace

Runner add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  train::Config& c = args->config;
  CLI::App* cmd = app.add_subcommand("train", "Train a model split across devices.");
  cmd->add_option("--model", c.model, "model: mlp")->capture_default_str();
  cmd->add_option("--width", c.width, "mlp: units per dense layer")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--blocks", c.blocks, "mlp: blocks of two dense layers")->capture_default_str()->check(CLI::Range(0, 10000));
  cmd->add_option("--dropout", c.dropout, "dropout probability")->capture_default_str()->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--data", c.data, "data set: mnist | fashion-mnist")->capture_default_str();
  cmd->add_option("--data-dir", c.data_dir, "folder of the data set (default: data/mnist, or the Debian package's folder)");
  cmd->add_option("--devices", c.devices, "a count of cpu devices (4) or a list (cpu:0,cpu:1 or cuda:0,cuda:0)")->capture_default_str();
  cmd->add_option("--threads-per-device", c.threads_per_device, "intra-op threads of each device (0: cores / devices)")->capture_default_str()->check(CLI::Range(0, 1024));
  cmd->add_option("--balance", args->balance, "layers per stage, e.g. 3,4,3 (default: even split by parameters)");
  cmd->add_option("--stages", c.stages, "pipeline stages (0: one per device)")->capture_default_str()->check(CLI::Range(0, 1024));
  cmd->add_option("--schedule", c.schedule, "sequential | gpipe | 1f1b | interleaved | zb-h1 | zb-v")->capture_default_str();
  cmd->add_option("--microbatches", c.microbatches, "micro-batches per batch (uneven splits allowed)")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--virtual-stages", c.virtual_stages, "model chunks per device (interleaved)")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_flag("--recompute", c.recompute, "keep only stage inputs and recompute the forward in the backward");
  cmd->add_option("--batch", c.batch, "samples per step (per replica)")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--epochs", c.epochs, "passes over the training set")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--steps", c.steps, "stop after this many steps (0: run the epochs)")->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--optimizer", c.optimizer, "adam | sgd (with --momentum)")->capture_default_str();
  cmd->add_option("--lr", c.lr, "learning rate")->capture_default_str();
  cmd->add_option("--momentum", c.momentum, "sgd momentum")->capture_default_str();
  cmd->add_option("--seed", c.seed, "seed of initialization, shuffling and dropout")->capture_default_str();
  cmd->add_option("--eval-batch", c.eval_batch, "samples per evaluation step")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--comm-timeout", c.comm_timeout_s, "seconds a device waits for a message before it reports and stops")->capture_default_str()->check(CLI::Range(0.001, 1e7));
  cmd->add_option("--progress", c.progress, "auto | bar | line | none")->capture_default_str()->check(CLI::IsMember({"auto", "bar", "line", "none"}));
  return [args]() {
    train::Config& c = args->config;
    std::unique_ptr<train::Trainer> trainer;
    try {
      if (!args->balance.empty()) c.balance = parse_int_list(args->balance, "--balance");
      trainer = std::make_unique<train::Trainer>(c);
    } catch (const Error& e) {
      std::fprintf(stderr, "tandem: %s\n", e.what());
      return kExitUsage;
    }
    try {
      std::cout << "data: " << trainer->source().describe() << "\n";
      std::cout << trainer->pipeline().placement_table() << std::flush;
      const bool lines = c.progress == "line" || (c.progress == "auto" && !isatty(fileno(stderr)));
      const int64_t total = trainer->total_steps();
      const int64_t every = std::max<int64_t>(1, total / 20);
      auto on_step = [&](int64_t step, int64_t n, double loss, double sps) {
        if (c.progress == "none") return;
        if (lines && step % every != 0 && step != n) return;
        std::fprintf(stderr, lines ? "step %lld/%lld loss=%.4f samples/s=%.0f\n"
                                   : "\rstep %lld/%lld loss=%.4f samples/s=%.0f   ",
                     static_cast<long long>(step), static_cast<long long>(n), loss, sps);
        if (!lines && step == n) std::fprintf(stderr, "\n");
      };
      train::Result r = trainer->run(on_step);
      std::cout << fmt::format("result: steps={} loss={:.4f} test_{}={:.4f} samples_per_s={:.1f} seconds={:.2f}\n",
                               r.steps, r.loss, r.metric_name, r.test_metric, r.samples_per_s, r.seconds);
      return 0;
    } catch (const Error& e) {
      std::fprintf(stderr, "tandem: %s\n", e.what());
      return kExitFailure;
    }
  };
}

}  // namespace tandem::cli
