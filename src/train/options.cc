// The option table (train/options.h) and what is made from it here: describe(), and the words
// messages name fields by. The words of the choices: config_words.h.
#include "tandem/train/options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <utility>

#include "config_words.h"
#include "tandem/common/check.h"
#include "tandem/memory/bytes.h"
#include "tandem/schedule/registry.h"
#include "tandem/train/catalog.h"

namespace tandem::train {
namespace {

// The builders of the table's entries, each for a field of one type.
ConfigOption entry(std::string field, std::string flag, OptionGroup group, OptionValue value,
                   std::string help) {
  ConfigOption o;
  o.field = std::move(field);
  o.flag = std::move(flag);
  o.group = group;
  o.value = value;
  o.help = std::move(help);
  return o;
}

template <typename T>
ConfigOption integer(std::string field, std::string flag, OptionGroup group, T Config::*member,
                     T min, T max, std::string help) {
  ConfigOption o =
      entry(std::move(field), std::move(flag), group, OptionValue::kInteger, std::move(help));
  o.min = static_cast<double>(min);
  o.max = static_cast<double>(max);
  o.get = [member](const Config& c) { return std::to_string(c.*member); };
  o.set = [member, min, max](Config& c, const std::string& text) {
    int64_t v = 0;
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, v);
    TANDEM_CHECK(!text.empty() && error == std::errc() && stop == end && v >= int64_t{min} &&
                     v <= int64_t{max},
                 "{} is not a whole number from {} to {}", text, min, max);
    c.*member = static_cast<T>(v);
  };
  return o;
}

// A number; min == max: any finite one.
ConfigOption real(std::string field, std::string flag, OptionGroup group, double Config::*member,
                  double min, double max, std::string help) {
  ConfigOption o =
      entry(std::move(field), std::move(flag), group, OptionValue::kReal, std::move(help));
  o.min = min;
  o.max = max;
  o.get = [member](const Config& c) { return fmt::format("{}", c.*member); };
  o.set = [member, min, max](Config& c, const std::string& text) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    TANDEM_CHECK(!text.empty() && end == text.c_str() + text.size() && std::isfinite(v),
                 "{} is not a number", text);
    TANDEM_CHECK(min == max || (v >= min && v <= max), "{} is not in [{}, {}]", text, min, max);
    c.*member = v;
  };
  return o;
}

ConfigOption text(std::string field, std::string flag, OptionGroup group,
                  std::string Config::*member, std::string help) {
  ConfigOption o =
      entry(std::move(field), std::move(flag), group, OptionValue::kText, std::move(help));
  o.get = [member](const Config& c) { return c.*member; };
  o.set = [member](Config& c, const std::string& text) { c.*member = text; };
  return o;
}

// A path: MPI ranks agree on whether it is given (it may differ by node).
ConfigOption path(std::string field, std::string flag, OptionGroup group,
                  std::string Config::*member, std::string help) {
  ConfigOption o = text(std::move(field), std::move(flag), group, member, std::move(help));
  o.agreement = Agreement::kWhetherGiven;
  o.show_default = false;
  return o;
}

ConfigOption switch_(std::string field, std::string flag, OptionGroup group, bool Config::*member,
                     std::string help) {
  ConfigOption o =
      entry(std::move(field), std::move(flag), group, OptionValue::kSwitch, std::move(help));
  o.show_default = false;
  o.get = [member](const Config& c) { return c.*member ? "true" : "false"; };
  o.set = [member](Config& c, const std::string& text) {
    TANDEM_CHECK(text == "true" || text == "false", "{} is not true or false", text);
    c.*member = text == "true";
  };
  return o;
}

template <typename E>
ConfigOption choice(std::string field, std::string flag, OptionGroup group, E Config::*member,
                    const Words<E>& words, std::string help) {
  ConfigOption o =
      entry(std::move(field), std::move(flag), group, OptionValue::kChoice, std::move(help));
  o.choices = all_words(words);
  o.get = [member, &words](const Config& c) { return word_of(words, c.*member); };
  o.set = [member, &words](Config& c, const std::string& text) {
    c.*member = value_of(words, text);
  };
  return o;
}

// "3,4,3": layers per stage.
std::vector<int> layer_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    TANDEM_CHECK(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos,
                 "'{}' is not a positive integer; give a list like 3,4,3", item);
    TANDEM_CHECK(item.size() <= 6, "'{}' is more layers than any model has; give a list like 3,4,3",
                 item);
    out.push_back(std::stoi(item));
  }
  return out;
}

// "dataset" or "dataset:mean,...;deviation,..." with the moments given, in full precision.
std::string normalize_text(const data::Normalization& n) {
  std::string text = data::normalize_name(n.mode);
  if (n.head) text += ":head";
  if (n.in_float32) text += ":float32";
  if (!n.mean.empty())
    text += fmt::format(":{};{}", fmt::join(n.mean, ","), fmt::join(n.deviation, ","));
  return text;
}

using G = OptionGroup;

}  // namespace

std::vector<ConfigOption> config_options() {
  using C = Config;
  std::vector<ConfigOption> t;
  // The model and its shape.
  t.push_back(text("model", "--model", G::kModel, &C::model,
                   fmt::format("model: {} (model.onnx)", fmt::join(model_names(), " | "))));
  t.push_back(text("loss", "--loss", G::kModel, &C::loss,
                   "ONNX models: cross-entropy (default) | mse | dice | dice+bce; a final Softmax "
                   "(cross-entropy) or Sigmoid (dice) is taken into the loss"));
  t.back().show_default = false;
  t.push_back(text("output", "--output", G::kModel, &C::output,
                   "ONNX models: the graph output the loss reads (default: the only one)"));
  t.back().show_default = false;
  t.push_back(integer("width", "--width", G::kModel, &C::width, int64_t{1}, int64_t{1} << 20,
                      "mlp: units per dense layer"));
  t.push_back(integer("blocks", "--blocks", G::kModel, &C::blocks, 0, 10000,
                      "mlp: blocks of two dense layers"));
  t.push_back(
      real("dropout", "--dropout", G::kModel, &C::dropout, 0.0, 0.99, "dropout probability"));
  t.push_back(
      integer("convs", "--convs", G::kModel, &C::convs, 1, 1000, "conv3d-stack: convolutions"));
  t.push_back(
      integer("filters", "--filters", G::kModel, &C::filters, int64_t{0}, int64_t{1} << 16,
              "conv3d-stack: filters per conv (default 256); unet3d: first level's (default 32)"));
  t.push_back(
      integer("levels", "--levels", G::kModel, &C::levels, 1, 10, "unet3d: resolution levels"));
  t.push_back(switch_("bce", "--bce", G::kModel, &C::bce,
                      "unet3d: add binary cross-entropy to the Dice loss"));
  t.push_back(integer("classes", "--classes", G::kModel, &C::classes, int64_t{2}, int64_t{1} << 24,
                      "mlp: classes (outputs); labels are 0 .. classes-1"));
  // The data.
  t.push_back(
      integer("volume", "--volume", G::kData, &C::volume, 1, 4096,
              "side S of the S^3 input volumes (crops of the MRI or of nifti:DIR, or synthetic)"));
  t.push_back(integer("train_samples", "--train-samples", G::kData, &C::train_samples, int64_t{1},
                      int64_t{1} << 40,
                      "volumetric data (not npy:DIR): samples (crops) per epoch"));
  t.push_back(integer("test_samples", "--test-samples", G::kData, &C::test_samples, int64_t{0},
                      int64_t{1} << 40, "volumetric data (not npy:DIR): held-out samples (crops)"));
  t.push_back(text("data", "--data", G::kData, &C::data,
                   fmt::format("data set: {} (nifti:DIR: DIR/images/*.nii[.gz] with DIR/labels/ "
                               "of the same names; npy:DIR: DIR/train_x.npy, train_y.npy[, "
                               "test_x.npy, test_y.npy])",
                               fmt::join(data_names(), " | "))));
  {
    ConfigOption o = entry(
        "normalize", "--normalize", G::kData, OptionValue::kChoice,
        "how inputs are standardized: none | dataset (the training inputs' mean and deviation) "
        "| per-image (each image's own, per channel); default: the data set's (dataset for "
        "mnist and npy:DIR, per-image for nifti:DIR and mri (over the head), none for spheres "
        "and regression). Checkpoints record it; eval and predict apply the training's");
    o.choices = {"none", "dataset", "per-image"};
    o.show_default = false;
    o.get = [](const Config& c) { return normalize_text(c.normalize); };
    o.set = [](Config& c, const std::string& v) { c.normalize.mode = data::parse_normalize(v); };
    t.push_back(std::move(o));
  }
  t.push_back(integer("test_files", "--test-files", G::kData, &C::test_files, 0, 1 << 20,
                      "nifti:DIR: the last files by name held out for --test-samples crops"));
  t.push_back(path("data_dir", "--data-dir", G::kData, &C::data_dir,
                   "folder of the data set (default: data/mnist, or the Debian package's folder)"));
  // Placement.
  {
    ConfigOption o = text("devices", "--devices", G::kPlacement, &C::devices,
                          "a count of cpu devices (4) or a list (cpu:0,cpu:1 or cuda:0,cuda:0)");
    o.set = [](Config& c, const std::string& v) {
      c.devices = v;
      c.devices_given = true;
    };
    t.push_back(std::move(o));
  }
  t.push_back(switch_("devices_given", "", G::kNone, &C::devices_given,
                      "--devices was given (under MPI a count must then match the ranks)"));
  {
    // A count the machine chooses would give the same command other bits on another machine (a
    // product's last bits depend on its thread count): `auto` is an opt-in, never the default.
    ConfigOption o =
        entry("threads_per_device", "--threads-per-device", G::kPlacement, OptionValue::kInteger,
              "intra-op threads of each device: a count (the same command then gives the same bits "
              "on any machine) | auto: the cores divided among the devices, faster on a machine "
              "with many cores, but its bits depend on how many cores the machine has");
    o.choices = {"auto"};
    o.min = 1;
    o.max = 1024;
    o.get = [](const Config& c) {
      return c.threads_per_device == 0 ? std::string("auto") : std::to_string(c.threads_per_device);
    };
    const ConfigOption count =
        integer("threads_per_device", "", G::kPlacement, &C::threads_per_device, 1, 1024, "");
    o.set = [count](Config& c, const std::string& v) {
      if (v == "auto")
        c.threads_per_device = 0;
      else
        count.set(c, v);
    };
    t.push_back(std::move(o));
  }
  {
    ConfigOption o =
        entry("lend_idle_cores", "--idle-cores", G::kPlacement, OptionValue::kChoice,
              "keep: each device keeps its own threads, and the same command gives the same bits "
              "every time | lend: CPU devices of a process that wait lend their cores to those "
              "computing: faster when stages often wait, but it trades bitwise reproducibility for "
              "speed (how many BLAS threads compute a product then depends on timing, and on some "
              "BLAS kernels so do its last bits)");
    o.choices = {"keep", "lend"};
    o.words = "--idle-cores lend";
    o.get = [](const Config& c) { return c.lend_idle_cores ? "lend" : "keep"; };
    o.set = [](Config& c, const std::string& v) {
      TANDEM_CHECK(v == "keep" || v == "lend", "{} is not one of keep, lend", v);
      c.lend_idle_cores = v == "lend";
    };
    t.push_back(std::move(o));
  }
  {
    ConfigOption o = entry("balance", "--balance", G::kPlacement, OptionValue::kText,
                           "layers per stage, e.g. 3,4,3 (default: split by --partition)");
    o.show_default = false;
    o.get = [](const Config& c) { return fmt::format("{}", fmt::join(c.balance, ",")); };
    o.set = [](Config& c, const std::string& v) { c.balance = layer_counts(v); };
    t.push_back(std::move(o));
  }
  t.push_back(
      choice("partition", "--partition", G::kPlacement, &C::partition, partition_words(),
             "time: the most even time per stage, each layer's forward and backward measured on "
             "one micro-batch (on CUDA devices: the layers' FLOPs), within --device-memory when "
             "given | parameters: even parameter counts | memory: the smallest largest peak, "
             "measured "
             "per layer on one micro-batch under the schedule (and --recompute) | fit: the "
             "most even FLOPs among the splits whose planned peaks fit --device-memory"));
  t.push_back(integer("stages", "--stages", G::kPlacement, &C::stages, 0, 1024,
                      "pipeline stages (0: one per device, or per group of --spatial)"));
  t.push_back(integer("spatial", "--spatial", G::kPlacement, &C::spatial, 1, 1024,
                      "slabs per sample: every stage runs on a group of this many devices, each "
                      "holding one depth slab of every activation (volumetric models, and ONNX "
                      "graphs whose nodes keep to slabs)"));
  t.push_back(text("schedule", "--schedule", G::kPlacement, &C::schedule,
                   fmt::format("{}", fmt::join(schedule::schedule_names(), " | "))));
  t.push_back(integer("microbatches", "--microbatches", G::kPlacement, &C::microbatches, 1, 1 << 20,
                      "micro-batches per batch (uneven splits allowed)"));
  t.push_back(integer("virtual_stages", "--virtual-stages", G::kPlacement, &C::virtual_stages, 1,
                      64, "model chunks per device (interleaved)"));
  t.push_back(integer("replicas", "--replicas", G::kPlacement, &C::replicas, 1, 1 << 16,
                      "data-parallel copies of the pipeline (MPI: ranks = stages x spatial x "
                      "replicas)"));
  t.push_back(choice("transport", "--transport", G::kPlacement, &C::transport, transport_words(),
                     "auto (MPI when launched by mpirun with >1 rank) | inprocess | mpi"));
  t.push_back(choice("mpi_cuda", "--mpi-cuda", G::kPlacement, &C::mpi_cuda, mpi_cuda_words(),
                     "under MPI, how CUDA tensors go between ranks: auto (direct when MPI is "
                     "CUDA-aware) | staged (through pinned host memory) | direct (GPU to GPU)"));
  t.push_back(real("comm_timeout_s", "--comm-timeout", G::kPlacement, &C::comm_timeout_s, 0.001,
                   1e7, "seconds a device waits for a message before it reports and stops"));
  {
    ConfigOption o = entry("device_memory", "--device-memory", G::kPlacement, OptionValue::kText,
                           "memory budget per device, e.g. 2GiB (default: none)");
    o.show_default = false;
    o.get = [](const Config& c) { return std::to_string(c.device_memory); };
    o.set = [](Config& c, const std::string& v) {
      c.device_memory = memory::parse_bytes(v);
      // 0 is how the library says "no budget"; on the command line that is leaving it out.
      TANDEM_CHECK(c.device_memory > 0,
                   "{} gives no memory at all; give a budget such as 2GiB, or leave the option "
                   "out for no budget",
                   v);
    };
    t.push_back(std::move(o));
  }
  t.push_back(
      switch_("log_placement", "--log-placement", G::kPlacement, &C::log_placement,
              "print, for every layer, the devices its forward and its backward actually ran on"));
  {
    ConfigOption o = entry("recompute", "--recompute", G::kRecompute, OptionValue::kChoice,
                           "none | stage: keep only each stage's inputs and recompute its forward "
                           "in the backward");
    o.choices = {"none", "stage"};
    o.words = "--recompute stage";
    o.get = [](const Config& c) { return c.recompute ? "stage" : "none"; };
    o.set = [](Config& c, const std::string& v) {
      TANDEM_CHECK(v == "none" || v == "stage", "{} is not one of none, stage", v);
      c.recompute = v == "stage";
    };
    t.push_back(std::move(o));
  }
  t.push_back(choice(
      "precision", "--precision", G::kPlacement, &C::precision, precision_words(),
      "the type each device's forward computes in: fp32 | bf16: convolutions and products in "
      "bfloat16 under LibTorch's autocast, activations, messages and halos in half the bytes; "
      "weights, gradients, the optimizer, losses and checkpoints in fp32 (on CPU devices it needs "
      "oneDNN's bf16 kernels: --cpu-kernels native on a processor with AVX-512) | fp16: CUDA "
      "devices only, with dynamic loss scaling (--loss-scale)"));
  // Batches and the seed.
  t.push_back(integer("batch", "--batch", G::kBatch, &C::batch, 1, 1 << 24,
                      "samples per step (per replica); volumetric models also evaluate in steps "
                      "of it"));
  t.push_back(integer("eval_batch", "--eval-batch", G::kBatch, &C::eval_batch, 1, 1 << 24,
                      "samples per evaluation step (image data; under --device-memory, --batch "
                      "instead, which the memory plan covers)"));
  {
    // Parsed here rather than as an integer of the table's range, which is that of int64.
    ConfigOption o =
        entry("seed", "--seed", G::kBatch, OptionValue::kText,
              "seed of initialization, shuffling, dropout and synthetic data (0 to 2^64-1)");
    o.get = [](const Config& c) { return std::to_string(c.seed); };
    o.set = [](Config& c, const std::string& v) {
      uint64_t seed = 0;
      const char* end = v.data() + v.size();
      const auto [stop, error] = std::from_chars(v.data(), end, seed);
      TANDEM_CHECK(!v.empty() && error == std::errc() && stop == end,
                   "{} is not a whole number from 0 to {}", v,
                   std::numeric_limits<uint64_t>::max());
      c.seed = seed;
    };
    t.push_back(std::move(o));
  }
  // Optimization.
  t.push_back(choice("optimizer", "--optimizer", G::kOptimizer, &C::optimizer, optimizer_words(),
                     "adam | sgd (with --momentum)"));
  t.push_back(real("lr", "--lr", G::kOptimizer, &C::lr, 0, 0, "learning rate"));
  t.push_back(choice("lr_schedule", "--lr-schedule", G::kOptimizer, &C::lr_schedule,
                     lr_schedule_words(), "cosine (from --lr down to 0 over the run) | constant"));
  t.push_back(real("momentum", "--momentum", G::kOptimizer, &C::momentum, 0, 0, "sgd momentum"));
  t.push_back(choice(
      "loss_scaling", "--loss-scale", G::kOptimizer, &C::loss_scaling, loss_scaling_words(),
      "auto (dynamic with --precision fp16, none otherwise) | dynamic: the loss's backward starts "
      "from a scale that halves when a gradient overflows (the step is then skipped on every "
      "device and rank) and doubles after --loss-scale-interval clean steps; the gradients are "
      "divided by it before the optimizer | none"));
  t.push_back(real("loss_scale_init", "--loss-scale-init", G::kOptimizer, &C::loss_scale_init,
                   1.0 / (1 << 24), 18446744073709551616.0, "the first step's loss scale"));
  t.push_back(integer("loss_scale_interval", "--loss-scale-interval", G::kOptimizer,
                      &C::loss_scale_interval, int64_t{1}, int64_t{1} << 40,
                      "clean steps in a row after which the loss scale doubles"));
  // The run: its length, checkpoints, what to do.
  t.push_back(integer("epochs", "--epochs", G::kRun, &C::epochs, 0, 100000,
                      "passes over the training set"));
  t.push_back(integer("steps", "--steps", G::kRun, &C::steps, int64_t{0}, int64_t{1} << 40,
                      "stop after this many steps (0: run the epochs)"));
  t.push_back(path("save_dir", "--save-dir", G::kRun, &C::save_dir,
                   "write checkpoints (sharded per stage, atomic) into this folder"));
  t.push_back(integer("save_every", "--save-every", G::kRun, &C::save_every, int64_t{0},
                      int64_t{1} << 40, "steps between checkpoints (0: only at the end)"));
  t.push_back(integer("keep", "--keep", G::kRun, &C::keep, 0, 1 << 20,
                      "complete checkpoints to keep (0: all)"));
  t.push_back(switch_("overwrite", "--overwrite", G::kRun, &C::overwrite,
                      "let this run replace the checkpoints another run left in --save-dir (they "
                      "are removed when this run saves its first one)"));
  t.push_back(path("resume", "--resume", G::kRun, &C::resume,
                   "continue the run saved in this folder from its latest complete checkpoint "
                   "(or from a step-N checkpoint folder); a state dict file goes to --init-from"));
  t.push_back(path("init_from", "--init-from", G::kRun, &C::init_from,
                   "start from a state dict (tandem consolidate, or torch.save of a dict "
                   "'<layer>.<param>' -> tensor) or a checkpoint"));
  t.push_back(switch_("plan_only", "--plan-only", G::kRun, &C::plan_only,
                      "do not train: measure the layers, print the placement and the memory plan "
                      "of the split that would run (with --device-memory: whether it fits) and "
                      "stop; status 3 when it does not fit"));
  t.push_back(switch_("eval_only", "--eval-only", G::kRun, &C::eval_only,
                      "do not train: evaluate on the held-out set (with --init-from) and stop "
                      "(tandem eval --checkpoint does the same)"));
  t.push_back(choice("progress", "--progress", G::kRun, &C::progress, progress_words(),
                     "auto | bar | line | none"));
  // Faults put into a run to see that they are caught.
  {
    ConfigOption o =
        entry("faults", "--inject-fault", G::kVerify, OptionValue::kText,
              "to see a fault caught: corrupt the split run (repeatable); KIND:FIELD=VALUE,... "
              "as the fault-injecting transport reads it, e.g. zero:grad=1,mb=0 (a gradient "
              "message of micro-batch 0 arrives as zeros), zero:from=0,to=1,grad=0 (the first "
              "message from device 0 to 1, a halo under --spatial), or "
              "skip-backward:stage=0,mb=1 (that backward does not run)");
    o.repeatable = true;
    o.show_default = false;
    o.get = [](const Config& c) { return fmt::format("{}", fmt::join(c.faults, ";")); };
    o.set = [](Config& c, const std::string& v) { c.faults.push_back(v); };
    t.push_back(std::move(o));
  }
  return t;
}

ConfigOption config_option(const std::string& field) {
  for (ConfigOption& o : config_options())
    if (o.field == field) return std::move(o);
  TANDEM_CHECK(false, "Config has no option '{}'", field);
  return {};
}

std::string flag_of_field(const std::string& field) {
  for (const ConfigOption& o : config_options()) {
    if (o.field != field) continue;
    if (!o.words.empty()) return o.words;
    return o.flag.empty() ? "Config::" + field : o.flag;
  }
  return "Config::" + field;
}

std::string describe(const Config& c) {
  std::string out;
  for (const ConfigOption& o : config_options()) {
    if (!out.empty()) out += ' ';
    const std::string value = o.get(c);
    out += o.field + "=" +
           (o.agreement == Agreement::kWhetherGiven ? (value.empty() ? "false" : "true") : value);
  }
  return out;
}

}  // namespace tandem::train
