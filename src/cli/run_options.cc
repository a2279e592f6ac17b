#include "run_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cstdint>
#include <limits>
#include <system_error>

#include "flag_words.h"
#include "tandem/schedule/registry.h"
#include "tandem/train/catalog.h"

namespace tandem::cli {

void add_model_options(CLI::App& cmd, train::Config& c) {
  add_model_shape_options(cmd, c, "--output");
  add_data_options(cmd, c);
}

void add_model_shape_options(CLI::App& cmd, train::Config& c, const std::string& output_flag) {
  cmd.footer("\n" + flag_words(train::catalog_help()));
  cmd.add_option("--model", c.model,
                 fmt::format("model: {} (model.onnx)", fmt::join(train::model_names(), " | ")))
      ->capture_default_str();
  cmd.add_option("--loss", c.loss,
                 "ONNX models: cross-entropy (default) | mse | dice | dice+bce; a final Softmax "
                 "(cross-entropy) or Sigmoid (dice) is taken into the loss");
  cmd.add_option(output_flag, c.output,
                 "ONNX models: the graph output the loss reads (default: the only one)");
  cmd.add_option("--width", c.width, "mlp: units per dense layer")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--blocks", c.blocks, "mlp: blocks of two dense layers")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  cmd.add_option("--dropout", c.dropout, "dropout probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  cmd.add_option("--convs", c.convs, "conv3d-stack: convolutions")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd.add_option("--filters", c.filters,
                 "conv3d-stack: filters per conv (default 256); unet3d: first level's (default 32)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 16));
  cmd.add_option("--levels", c.levels, "unet3d: resolution levels")
      ->capture_default_str()
      ->check(CLI::Range(1, 10));
  cmd.add_flag("--bce", c.bce, "unet3d: add binary cross-entropy to the Dice loss");
  cmd.add_option("--classes", c.classes, "mlp: classes (outputs); labels are 0 .. classes-1")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 24));
}

void add_data_options(CLI::App& cmd, train::Config& c) {
  cmd.add_option("--volume", c.volume,
                 "side S of the S^3 input volumes (crops of the MRI or of nifti:DIR, or synthetic)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--train-samples", c.train_samples,
                 "volumetric data (not npy:DIR): samples (crops) per epoch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd.add_option("--test-samples", c.test_samples,
                 "volumetric data (not npy:DIR): held-out samples (crops)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd.add_option("--data", c.data,
                 fmt::format("data set: {} (nifti:DIR: DIR/images/*.nii[.gz] with DIR/labels/ "
                             "of the same names; npy:DIR: DIR/train_x.npy, train_y.npy[, "
                             "test_x.npy, test_y.npy])",
                             fmt::join(train::data_names(), " | ")))
      ->capture_default_str();
  cmd.add_option_function<std::string>(
         "--normalize", [&c](const std::string& v) { c.normalize.mode = data::parse_normalize(v); },
         "how inputs are standardized: none | dataset (the training inputs' mean and deviation) "
         "| per-image (each image's own, per channel); default: the data set's (dataset for "
         "mnist and npy:DIR, per-image for nifti:DIR and mri (over the head), none for spheres "
         "and regression). Checkpoints record it; eval and predict apply the training's")
      ->check(CLI::IsMember({"none", "dataset", "per-image"}));
  cmd.add_option("--test-files", c.test_files,
                 "nifti:DIR: the last files by name held out for --test-samples crops")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--data-dir", c.data_dir,
                 "folder of the data set (default: data/mnist, or the Debian package's folder)");
}

void add_placement_options(CLI::App& cmd, RunArgs& args) {
  train::Config& c = args.config;
  cmd.add_option("--devices", c.devices,
                 "a count of cpu devices (4) or a list (cpu:0,cpu:1 or cuda:0,cuda:0)")
      ->capture_default_str()
      ->each([&c](const std::string&) { c.devices_given = true; });
  // A count the machine chooses would give the same command other bits on another machine (a
  // product's last bits depend on its thread count): `auto` is an opt-in, never the default.
  cmd.add_option_function<std::string>(
         "--threads-per-device",
         [&c](const std::string& v) { c.threads_per_device = v == "auto" ? 0 : std::stoi(v); },
         "intra-op threads of each device: a count (the same command then gives the same bits "
         "on any machine) | auto: the cores divided among the devices, faster on a machine "
         "with many cores, but its bits depend on how many cores the machine has")
      ->default_str("1")
      ->check(CLI::IsMember({"auto"}) | CLI::Range(1, 1024));
  cmd.add_option("--cpu-kernels", args.cpu_kernels,
                 "portable: OpenBLAS's Haswell and ATen's AVX2 kernels on every x86-64 machine "
                 "with AVX2, so the same command gives the same bits on any of them | native: "
                 "the kernels the libraries choose for this processor (OPENBLAS_CORETYPE "
                 "respected), on AVX-512 faster but with other bits than elsewhere")
      ->capture_default_str()
      ->envname("TANDEM_CPU_KERNELS")
      ->check(CLI::IsMember({"portable", "native"}));
  cmd.add_option_function<std::string>(
         "--idle-cores", [&c](const std::string& v) { c.lend_idle_cores = v == "lend"; },
         "keep: each device keeps its own threads, and the same command gives the same bits "
         "every time | lend: CPU devices of a process that wait lend their cores to those "
         "computing: faster when stages often wait, but it trades bitwise reproducibility for "
         "speed (how many BLAS threads compute a product then depends on timing, and on some "
         "BLAS kernels so do its last bits)")
      ->default_str("keep")
      ->check(CLI::IsMember({"lend", "keep"}));
  cmd.add_option("--balance", args.balance,
                 "layers per stage, e.g. 3,4,3 (default: split by --partition)");
  cmd.add_option("--partition", c.partition,
                 "parameters: even parameter counts | memory: the smallest largest peak, measured "
                 "per layer on one micro-batch under the schedule (and --recompute) | fit: the "
                 "most even FLOPs among the splits whose planned peaks fit --device-memory")
      ->capture_default_str()
      ->check(CLI::IsMember({"parameters", "memory", "fit"}));
  cmd.add_option("--stages", c.stages,
                 "pipeline stages (0: one per device, or per group of --spatial)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  cmd.add_option("--spatial", c.spatial,
                 "slabs per sample: every stage runs on a group of this many devices, each "
                 "holding one depth slab of every activation (volumetric models, and ONNX graphs "
                 "whose nodes keep to slabs)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--schedule", c.schedule,
                 fmt::format("{}", fmt::join(schedule::schedule_names(), " | ")))
      ->capture_default_str();
  cmd.add_option("--microbatches", c.microbatches,
                 "micro-batches per batch (uneven splits allowed)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--virtual-stages", c.virtual_stages, "model chunks per device (interleaved)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd.add_option("--replicas", c.replicas,
                 "data-parallel copies of the pipeline (MPI: ranks = stages x spatial x replicas)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd.add_option("--transport", c.transport,
                 "auto (MPI when launched by mpirun with >1 rank) | inprocess | mpi")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "inprocess", "mpi"}));
  cmd.add_option("--mpi-cuda", c.mpi_cuda,
                 "under MPI, how CUDA tensors go between ranks: auto (direct when MPI is "
                 "CUDA-aware) | staged (through pinned host memory) | direct (GPU to GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "staged", "direct"}));
  cmd.add_option("--comm-timeout", c.comm_timeout_s,
                 "seconds a device waits for a message before it reports and stops")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e7));
  cmd.add_option("--device-memory", args.device_memory,
                 "memory budget per device, e.g. 2GiB (default: none)");
  cmd.add_flag("--log-placement", c.log_placement,
               "print, for every layer, the devices its forward and its backward actually ran on");
}

void add_batch_options(CLI::App& cmd, train::Config& c) {
  cmd.add_option("--batch", c.batch,
                 "samples per step (per replica); volumetric models also evaluate in steps of it")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd.add_option("--eval-batch", c.eval_batch, "samples per evaluation step (image data)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  // Parsed here rather than by CLI11, which reads -1 as 2^64-1 and clamps larger numbers to it.
  cmd.add_option_function<std::string>(
         "--seed",
         [&c](const std::string& text) {
           uint64_t seed = 0;
           const char* end = text.data() + text.size();
           const auto [stop, error] = std::from_chars(text.data(), end, seed);
           if (text.empty() || error != std::errc() || stop != end)
             throw CLI::ValidationError("--seed",
                                        fmt::format("{} is not a whole number from 0 to {}", text,
                                                    std::numeric_limits<uint64_t>::max()));
           c.seed = seed;
         },
         "seed of initialization, shuffling, dropout and synthetic data (0 to 2^64-1)")
      ->default_str(std::to_string(c.seed));
}

void add_recompute_option(CLI::App& cmd, train::Config& c) {
  cmd.add_option_function<std::string>(
         "--recompute", [&c](const std::string& v) { c.recompute = v == "stage"; },
         "none | stage: keep only each stage's inputs and recompute its forward in the backward")
      ->default_str("none")
      ->check(CLI::IsMember({"none", "stage"}));
}

void add_optimizer_options(CLI::App& cmd, train::Config& c) {
  cmd.add_option("--optimizer", c.optimizer, "adam | sgd (with --momentum)")->capture_default_str();
  cmd.add_option("--lr", c.lr, "learning rate")->capture_default_str();
  cmd.add_option("--lr-schedule", c.lr_schedule,
                 "cosine (from --lr down to 0 over the run) | constant")
      ->capture_default_str()
      ->check(CLI::IsMember({"cosine", "constant"}));
  cmd.add_option("--momentum", c.momentum, "sgd momentum")->capture_default_str();
}

}  // namespace tandem::cli
