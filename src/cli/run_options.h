// The options `tandem train` and `tandem eval` share: the model and its data, where the stages
// run and how micro-batches flow through them, batch sizes and the seed. Each function
// registers one group on a subcommand, with the defaults of train::Config.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tandem/train/config.h"

namespace tandem::cli {

// What the shared options fill in. Two options arrive as text and are parsed (with messages
// that name them) when the run starts: see start_session().
struct RunArgs {
  train::Config config;
  std::string balance;                   // --balance, e.g. "3,4,3"
  std::string device_memory;             // --device-memory, e.g. "2GiB"
  std::string cpu_kernels = "portable";  // --cpu-kernels: portable (AVX2 family) | native
};

// --model (with --loss and --output for ONNX files) and its shape (--width, --blocks, --dropout,
// --convs, --filters, --levels, --volume,
// --bce), --data, --data-dir, --train-samples, --test-samples.
void add_model_options(CLI::App& cmd, train::Config& c);
// Its two halves: the model and its shape (the ONNX graph output under `output_flag`), and the
// data (--volume, --data, --data-dir, --test-files, --train-samples, --test-samples).
void add_model_shape_options(CLI::App& cmd, train::Config& c, const std::string& output_flag);
void add_data_options(CLI::App& cmd, train::Config& c);

// --devices, --threads-per-device, --cpu-kernels, --balance, --stages, --schedule, --microbatches,
// --virtual-stages, --replicas, --transport, --comm-timeout, --device-memory, --log-placement.
void add_placement_options(CLI::App& cmd, RunArgs& args);

// --batch, --eval-batch, --seed.
void add_batch_options(CLI::App& cmd, train::Config& c);

// --recompute none | stage.
void add_recompute_option(CLI::App& cmd, train::Config& c);

// --optimizer, --lr, --lr-schedule, --momentum.
void add_optimizer_options(CLI::App& cmd, train::Config& c);

}  // namespace tandem::cli
