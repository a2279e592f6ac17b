// The configuration of a training run: what `tandem train` parses, and what a program may
// fill in directly. Every field has the CLI's default.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/data/normalization.h"
#include "tandem/trace/progress.h"

namespace tandem::train {

// The closed choices of a Config. Their words (name_of, and the command line's) are in
// train/options.h with every option's.
enum class PartitionBy {
  kTime,        // the most even measured time (within the budget's planned peaks, if given)
  kParameters,  // even parameter counts
  kMemory,      // the smallest largest planned peak, measured per layer
  kFit,         // the most even FLOPs among the splits whose planned peaks fit the budget
};
enum class TransportKind {
  kAuto,       // MPI when started by a launcher with more than one rank, else in process
  kInProcess,  // every device in this process
  kMpi,        // one device per MPI rank
};
enum class MpiCuda {
  kAuto,    // GPU to GPU when MPI is CUDA-aware, else through pinned host memory
  kStaged,  // through pinned host memory
  kDirect,  // GPU to GPU
};
enum class OptimizerKind { kAdam, kSgd };
// The type each device's forward computes in (graph/precision.h): weights, their gradients, the
// optimizer and checkpoints stay fp32.
enum class Precision { kFp32, kBf16, kFp16 };
// Dynamic loss scaling (train/loss_scale.h), as PyTorch's GradScaler does it.
enum class LossScaling {
  kAuto,     // dynamic with fp16, none otherwise
  kDynamic,  // the loss's backward starts from a scale; a step whose gradients overflow is skipped
  kNone,     // the backward starts from 1
};
enum class LrSchedule {
  kCosine,    // from lr down to 0 over the run
  kConstant,  // lr throughout
};

struct Config {
  // Model: a built-in one by name, or an ONNX file (a path ending in .onnx).
  std::string model = "mlp";
  // ONNX models: the loss (cross-entropy | mse | dice | dice+bce; empty: cross-entropy) and
  // the graph output it reads (empty: the only one). Built-in models have their own.
  std::string loss;
  std::string output;
  int64_t width = 128;
  int blocks = 2;
  double dropout = 0.2;
  // conv3d-stack and unet3d.
  int convs = 10;
  int64_t filters = 0;  // 0: the model's default (256 for conv3d-stack, 32 for unet3d)
  int levels = 4;
  int volume = 32;              // side S of the S^3 volumes
  bool bce = false;             // unet3d: add binary cross-entropy to the Dice loss
  int64_t train_samples = 512;  // volumetric data: samples per epoch
  int64_t test_samples = 32;
  int64_t classes = 10;  // mlp: outputs (the class labels are 0 .. classes - 1)
  // Data: a built-in set (mnist, ...) or a folder of one's own, nifti:DIR or npy:DIR.
  std::string data = "mnist";
  std::string data_dir;  // empty: the data set's default folder
  int test_files = 1;    // nifti:DIR: the last files by name, held out
  // How the inputs are standardized (data/normalization.h): none | dataset | per-image, or the
  // data kind's default (docs/data.md). The moments are measured on the training inputs unless
  // given (eval and resume take a checkpoint's).
  data::Normalization normalize;
  // Placement.
  std::string devices = "4";
  bool devices_given = false;    // --devices on the command line (MPI: a count must match)
  int threads_per_device = 1;    // 0: cores / cpu devices (bits depend on the machine)
  bool lend_idle_cores = false;  // waiting CPU devices lend cores: not bitwise repeatable
  std::vector<int> balance;      // layers per stage; empty: split by `partition`
  PartitionBy partition = PartitionBy::kTime;  // when `balance` is empty
  int stages = 0;                              // 0: one stage per device (per group of `spatial`)
  int spatial = 1;                             // slabs per sample: devices in each stage's group
  int replicas = 1;
  TransportKind transport = TransportKind::kAuto;
  MpiCuda mpi_cuda = MpiCuda::kAuto;  // how CUDA tensors go between MPI ranks
  // Schedule.
  std::string schedule = "1f1b";
  int microbatches = 8;
  int virtual_stages = 1;
  bool recompute = false;
  Precision precision = Precision::kFp32;
  uint64_t device_memory = 0;  // bytes per device; 0: no budget
  bool log_placement = false;
  // Faults put into the run to see that they are caught (tandem verify --inject-fault): those
  // of transport::parse_fault's text form, which act on messages, and
  // "skip-backward:stage=S,mb=M": micro-batch M's backward does not run on stage S (the stage's
  // inputs get zero gradients).
  std::vector<std::string> faults;
  // Optimization.
  int batch = 64;  // per replica
  int epochs = 1;
  int64_t steps = 0;  // > 0: stop after this many steps
  OptimizerKind optimizer = OptimizerKind::kAdam;
  double lr = 1e-3;
  LrSchedule lr_schedule = LrSchedule::kCosine;
  double momentum = 0.9;
  LossScaling loss_scaling = LossScaling::kAuto;
  double loss_scale_init = 65536;      // the first step's scale (2^16)
  int64_t loss_scale_interval = 2000;  // clean steps in a row after which the scale doubles
  uint64_t seed = 0;
  int eval_batch = 1000;
  double comm_timeout_s = 300;
  trace::Progress::Mode progress = trace::Progress::Mode::kAuto;
  // Checkpoints.
  std::string save_dir;    // empty: no checkpoints
  int64_t save_every = 0;  // steps between checkpoints (and one at the end); 0: only at the end
  int keep = 3;            // complete checkpoints kept; 0: all
  std::string resume;      // a save folder or checkpoint to continue from; empty: start fresh
  // A save folder that holds checkpoints of another run is refused unless `resume` continues
  // it or this says to replace them (removed when this run saves its first checkpoint).
  bool overwrite = false;
  // A state dict (tandem consolidate, or PyTorch) or checkpoint to start from.
  std::string init_from;
  bool eval_only = false;  // no training: evaluate (e.g. with init_from) and stop
  bool plan_only = false;  // no training: measure, print the placement and memory plan, stop
};

// The words of a choice, as the command line takes them ("parameters", "inprocess", ...).
std::string name_of(PartitionBy v);
std::string name_of(TransportKind v);
std::string name_of(MpiCuda v);
std::string name_of(OptimizerKind v);
std::string name_of(Precision v);
std::string name_of(LossScaling v);
// Whether `c` scales its loss: kDynamic, or kAuto with fp16.
bool scales_loss(const Config& c);
// The ScalarType of a precision: kFloat, kBFloat16, kHalf.
c10::ScalarType compute_type(Precision v);
std::string name_of(LrSchedule v);
std::string name_of(trace::Progress::Mode v);

// One line "key=value ..." of every field (train/options.h: the option table), for logs and
// the configuration MPI ranks agree on.
std::string describe(const Config& c);

}  // namespace tandem::train
