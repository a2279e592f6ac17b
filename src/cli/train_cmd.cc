#include <cstdio>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "launch.h"
#include "observers.h"
#include "tandem/memory/bytes.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/trace/progress.h"
#include "tandem/train/trainer.h"

namespace tandem::cli {

namespace {
std::vector<int> parse_int_list(const std::string& text, const char* option) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    TANDEM_CHECK(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos,
                 "{} {}: '{}' is not a positive integer; give a list like 3,4,3", option, text,
                 item);
    out.push_back(std::stoi(item));
  }
  return out;
}

// The placement table; under MPI with the rank and host of every stage (of replica 0).
// Collective under MPI: every rank calls it.
std::string placement_table(train::Trainer& t, Launch& launch) {
  if (!launch.mpi()) return t.pipeline().placement_table();
  return t.pipeline().placement_table(launch.gather(launch.host()));
}

struct TrainArgs {
  train::Config config;
  std::string balance;
  std::string device_memory;
  ObserveOptions observe;
};
}  // namespace

int run_train(TrainArgs& args) {
  train::Config& c = args.config;
  std::unique_ptr<Launch> launch;
  std::unique_ptr<train::Trainer> trainer;
  try {
    if (!args.balance.empty()) c.balance = parse_int_list(args.balance, "--balance");
    if (!args.device_memory.empty()) c.device_memory = memory::parse_bytes(args.device_memory);
    launch = std::make_unique<Launch>(c);
    launch->agree(c);
    trainer = std::make_unique<train::Trainer>(c, launch->transport());
    if (launch->mpi()) {
      Launch* l = launch.get();
      trainer->set_checkpoint_world(
          {l->rank(), l->world(), trainer->replica(), c.replicas, [l] { l->barrier(); }});
    }
  } catch (const memory::OutOfMemory& e) {
    const std::string prefix = launch ? launch->prefix() : "";
    std::fprintf(stderr, "%standem: %s\n", prefix.c_str(), e.what());
    if (launch && launch->mpi()) launch->abort(e.what());
    return kExitOutOfMemory;
  } catch (const Error& e) {
    const std::string prefix = launch ? launch->prefix() : "";
    std::fprintf(stderr, "%standem: %s\n", prefix.c_str(), e.what());
    if (launch && launch->mpi()) launch->abort(e.what());
    return kExitUsage;
  }
  const std::string prefix = launch->prefix();
  // Information comes from the process that owns the loss; warnings and errors from all.
  const bool main_process = trainer->pipeline().owns_loss() && trainer->replica() == 0;
  try {
    const std::string table = placement_table(*trainer, *launch);
    if (main_process) std::cout << prefix << "data: " << trainer->source().describe() << "\n";
    // Under MPI rank 0 gathered every rank's host, so it prints the table.
    if (launch->mpi() ? launch->rank() == 0 : main_process)
      std::cout << prefix << "placement:\n" << table << std::flush;
    trace::Progress progress(
        main_process ? trace::parse_mode(c.progress) : trace::Progress::Mode::kNone,
        trainer->total_steps());
    Observers observers(args.observe, *trainer, *launch);
    auto on_step = [&](int64_t step, int64_t, const runtime::StepStats& s, double sps) {
      progress.update(step, {{"loss", s.loss}, {"samples/s", sps}});
      observers.after_step(step, s, sps);
    };
    train::Result r = trainer->run(on_step);
    progress.finish();
    observers.finish(r);
    if (c.log_placement) {
      std::cout << prefix << "placement log (from execution):\n"
                << trainer->pipeline().placement_log_table();
    }
    if (main_process) {
      std::string mem;
      for (size_t d = 0; d < r.peak_bytes.size(); ++d) {
        if (r.peak_bytes[d])
          mem += fmt::format(" peak_mem_{}={}", trainer->pipeline().devices()[d].name,
                             r.peak_bytes[d]);
      }
      std::cout << fmt::format(
          "{}result: steps={} loss={:.4f} test_{}={:.4f} samples_per_s={:.1f} seconds={:.2f}{}\n",
          prefix, r.steps, r.loss, r.metric_name, r.test_metric, r.samples_per_s, r.seconds, mem);
    }
    return 0;
  } catch (const runtime::StepError& e) {
    std::fprintf(stderr, "%standem: %s\n", prefix.c_str(), e.what());
    launch->abort(e.what());
    return e.out_of_memory ? kExitOutOfMemory : kExitFailure;
  } catch (const Error& e) {
    std::fprintf(stderr, "%standem: %s\n", prefix.c_str(), e.what());
    launch->abort(e.what());
    return kExitFailure;
  }
}

Runner add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  train::Config& c = args->config;
  CLI::App* cmd = app.add_subcommand("train", "Train a model split across devices.");
  cmd->add_option("--model", c.model, "model: mlp | conv3d-stack | unet3d")->capture_default_str();
  cmd->add_option("--width", c.width, "mlp: units per dense layer")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--blocks", c.blocks, "mlp: blocks of two dense layers")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--dropout", c.dropout, "dropout probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--convs", c.convs, "conv3d-stack: convolutions")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option(
         "--filters", c.filters,
         "conv3d-stack: filters per conv (default 256); unet3d: first level's (default 32)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 16));
  cmd->add_option("--levels", c.levels, "unet3d: resolution levels")
      ->capture_default_str()
      ->check(CLI::Range(1, 10));
  cmd->add_option("--volume", c.volume,
                  "side S of the S^3 input volumes (crops of the MRI, or synthetic)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--bce", c.bce, "unet3d: add binary cross-entropy to the Dice loss");
  cmd->add_option("--train-samples", c.train_samples, "volumetric data: samples per epoch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--test-samples", c.test_samples, "volumetric data: held-out samples")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--data", c.data, "data set: mnist | fashion-mnist | mri | spheres | regression")
      ->capture_default_str();
  cmd->add_option("--data-dir", c.data_dir,
                  "folder of the data set (default: data/mnist, or the Debian package's folder)");
  cmd->add_option("--devices", c.devices,
                  "a count of cpu devices (4) or a list (cpu:0,cpu:1 or cuda:0,cuda:0)")
      ->capture_default_str();
  cmd->add_option("--threads-per-device", c.threads_per_device,
                  "intra-op threads of each device (0: cores / devices)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--balance", args->balance,
                  "layers per stage, e.g. 3,4,3 (default: even split by parameters)");
  cmd->add_option("--stages", c.stages, "pipeline stages (0: one per device)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--schedule", c.schedule,
                  "sequential | gpipe | 1f1b | interleaved | zb-h1 | zb-v")
      ->capture_default_str();
  cmd->add_option("--microbatches", c.microbatches,
                  "micro-batches per batch (uneven splits allowed)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--virtual-stages", c.virtual_stages, "model chunks per device (interleaved)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--recompute", c.recompute,
                "keep only stage inputs and recompute the forward in the backward");
  cmd->add_option("--batch", c.batch, "samples per step (per replica)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--epochs", c.epochs, "passes over the training set")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--steps", c.steps, "stop after this many steps (0: run the epochs)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--optimizer", c.optimizer, "adam | sgd (with --momentum)")
      ->capture_default_str();
  cmd->add_option("--lr", c.lr, "learning rate")->capture_default_str();
  cmd->add_option("--lr-schedule", c.lr_schedule,
                  "cosine (from --lr down to 0 over the run) | constant")
      ->capture_default_str()
      ->check(CLI::IsMember({"cosine", "constant"}));
  cmd->add_option("--momentum", c.momentum, "sgd momentum")->capture_default_str();
  cmd->add_option("--seed", c.seed, "seed of initialization, shuffling and dropout")
      ->capture_default_str();
  cmd->add_option("--eval-batch", c.eval_batch, "samples per evaluation step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--comm-timeout", c.comm_timeout_s,
                  "seconds a device waits for a message before it reports and stops")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e7));
  cmd->add_option("--replicas", c.replicas,
                  "data-parallel copies of the pipeline (MPI: ranks = stages x replicas)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--transport", c.transport,
                  "auto (MPI when launched by mpirun with >1 rank) | inprocess | mpi")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "inprocess", "mpi"}));
  cmd->add_option("--device-memory", args->device_memory,
                  "memory budget per device, e.g. 2GiB (default: none)");
  cmd->add_flag("--log-placement", c.log_placement,
                "print, for every layer, the devices its forward and its backward actually ran on");
  cmd->add_option("--trace", args->observe.trace,
                  "write a Chrome trace (Perfetto, chrome://tracing) of the traced steps");
  cmd->add_option("--timeline", args->observe.timeline,
                  "write an SVG timeline of the traced steps");
  cmd->add_option(
      "--report", args->observe.report,
      "write a JSON run report (busy/idle, bubble measured vs predicted, memory, FLOP/s)");
  cmd->add_option(
      "--tensorboard", args->observe.tensorboard,
      "write TensorBoard scalars (loss, samples/s, learning rate, accuracy) into this folder");
  cmd->add_option("--trace-steps", args->observe.trace_steps,
                  "how many steps to trace, after the first (warm-up) step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--save-dir", c.save_dir,
                  "write checkpoints (sharded per stage, atomic) into this folder");
  cmd->add_option("--save-every", c.save_every, "steps between checkpoints (0: only at the end)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--keep", c.keep, "complete checkpoints to keep (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option(
      "--resume", c.resume,
      "continue from the latest complete checkpoint in this folder (or from a step-N checkpoint)");
  cmd->add_option("--init-from", c.init_from,
                  "start from a state dict (tandem consolidate, or torch.save of a dict "
                  "'<layer>.<param>' -> tensor) or a checkpoint");
  cmd->add_flag("--eval-only", c.eval_only,
                "do not train: evaluate on the held-out set (with --init-from) and stop");
  cmd->add_option("--progress", c.progress, "auto | bar | line | none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "line", "none"}));
  return [args]() { return run_train(*args); };
}

}  // namespace tandem::cli
