// tandem predict: a trained model applied to whole scans, each in one piece across the devices.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <tuple>

#include "commands.h"
#include "common/output_path.h"
#include "flag_words.h"
#include "predict_images.h"
#include "run_options.h"
#include "session.h"
#include "tandem/checkpoint/all.h"
#include "tandem/common/check.h"
#include "tandem/data/idx.h"
#include "tandem/data/nifti.h"
#include "tandem/data/npy.h"
#include "tandem/memory/bytes.h"
#include "tandem/trace/progress.h"
#include "tandem/train/catalog.h"
#include "tandem/train/job.h"
#include "tandem/train/predict.h"

namespace tandem::cli {

namespace {
namespace fs = std::filesystem;

struct PredictArgs {
  RunArgs run;
  std::string checkpoint;
  std::string input, output;
  std::string kind = "probabilities";
  std::string standardize;  // empty: the checkpoint's record, else "all"
  double threshold = 0.5;
  std::string window;  // "D,H,W" or one side; empty: the whole scan in one piece
  double overlap = 0.25;
  std::string blend = "gaussian";
  int64_t window_batch = 1;
  std::string mirror;   // "D,H,W" or a subset, or digits 0..2
  std::string labels;   // a folder of labels named as the scans: each result's Dice
  int64_t batch = 256;  // images per forward
};

// How the inputs are standardized, and what chose it: --standardize when given (inputs
// prepared beforehand), else the record of the checkpoint's training, else `all`.
std::pair<data::Normalization, std::string> predict_normalization(const PredictArgs& args,
                                                                  bool images) {
  data::Normalization recorded;
  std::error_code ec;
  if (!args.checkpoint.empty() && fs::is_directory(args.checkpoint, ec))
    recorded = checkpoint::read_manifest(checkpoint::resolve_checkpoint(args.checkpoint))
                   .state.normalization;
  if (args.standardize.empty() && recorded.mode != data::Normalize::kDefault) {
    TANDEM_CHECK(!images || !recorded.head,
                 "the checkpoint's training standardized scans over their voxels > 0; these "
                 "inputs are images: give --standardize all or none");
    return {recorded, "as the checkpoint's training"};
  }
  const std::string word = args.standardize.empty() ? "all" : args.standardize;
  TANDEM_CHECK(!images || word != "head",
               "--standardize head is for scans; images are standardized over all their values "
               "(all) or not at all (none)");
  data::Normalization n;
  n.mode = word == "none" ? data::Normalize::kNone
           : images       ? data::Normalize::kDataset  // over all the given images' values
                          : data::Normalize::kPerImage;
  n.head = word == "head";
  std::string origin = args.standardize.empty() ? std::string("the default: --standardize all")
                                                : fmt::format("--standardize {}", word);
  if (recorded.mode != data::Normalize::kDefault && n != recorded)
    origin += fmt::format("; the checkpoint's training: {}", data::describe(recorded));
  return {n, origin};
}

// --window: one side for all three axes, or D,H,W.
std::array<int64_t, 3> parse_window(const std::string& text) {
  std::array<int64_t, 3> w{};
  if (text.empty()) return w;
  std::vector<int64_t> sides;
  std::string part;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != ',' && text[i] != 'x') {
      part += text[i];
      continue;
    }
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    TANDEM_CHECK(!part.empty() && *end == 0 && v >= 1,
                 "--window {}: give one side or three (D,H,W), each a whole number of at least 1",
                 text);
    sides.push_back(v);
    part.clear();
  }
  TANDEM_CHECK(sides.size() == 1 || sides.size() == 3,
               "--window {}: give one side or three (D,H,W), not {}", text, sides.size());
  for (size_t i = 0; i < 3; ++i) w[i] = sides[sides.size() == 1 ? 0 : i];
  return w;
}

// --mirror: the axes (D, H, W or 0, 1, 2) whose flips are averaged.
std::vector<int> parse_mirror(const std::string& text) {
  std::vector<int> axes;
  for (char ch : text) {
    if (ch == ',') continue;
    const size_t at = std::string("DHW012dhw").find(ch);
    TANDEM_CHECK(at != std::string::npos,
                 "--mirror {}: give the axes to flip as D, H, W (or 0, 1, 2), e.g. D,H,W", text);
    const int axis = static_cast<int>(at % 3);
    TANDEM_CHECK(std::find(axes.begin(), axes.end(), axis) == axes.end(),
                 "--mirror {}: axis {} is given twice", text, "DHW"[axis]);
    axes.push_back(axis);
  }
  return axes;
}

bool is_nifti(const std::string& path) {
  return ends_with(path, ".nii") || ends_with(path, ".nii.gz");
}
bool is_scan(const std::string& path) { return is_nifti(path) || ends_with(path, ".npy"); }

// The scans of --input and their outputs: one file to one file, or every scan of a folder to
// the file of the same name in the output folder. Throws tandem::Error (status 2) for what
// cannot work: a missing input, a folder without scans, an output folder equal to the input
// folder, an output of a kind the input cannot give, an output that is not a regular file.
std::vector<ScanJob> plan_jobs(const PredictArgs& a, bool images) {
  std::error_code ec;
  TANDEM_CHECK(fs::exists(a.input, ec), "--input {}: no such file or folder", a.input);
  std::vector<ScanJob> jobs;
  if (fs::is_directory(a.input, ec)) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(a.input, ec))
      if (!e.is_directory() && is_scan(e.path().filename().string()))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    TANDEM_CHECK(!names.empty(), "--input {}: the folder holds no scan (.nii, .nii.gz or .npy)",
                 a.input);
    TANDEM_CHECK(!fs::exists(a.output, ec) || fs::is_directory(a.output, ec),
                 "--output {}: --input is a folder, so --output must be a folder too", a.output);
    TANDEM_CHECK(!fs::exists(a.output, ec) || !fs::equivalent(a.input, a.output, ec),
                 "--output {} is the input folder: the results would replace the scans; give "
                 "another folder",
                 a.output);
    for (const std::string& n : names)
      jobs.push_back({(fs::path(a.input) / n).string(), (fs::path(a.output) / n).string(), ""});
  } else if (images) {
    TANDEM_CHECK(ends_with(a.output, ".npy") || ends_with(a.output, ".csv"),
                 "--output {}: the result of images is a file ending in .npy or .csv", a.output);
    if (!ends_with(a.input, ".npy")) data::read_idx_header(a.input);  // an IDX file, or its error
  } else {
    TANDEM_CHECK(is_scan(a.input), "--input {}: not a scan (.nii, .nii.gz or .npy) or a folder",
                 a.input);
    TANDEM_CHECK(is_scan(a.output),
                 "--output {}: the result of one scan is a file ending in .nii, .nii.gz or .npy",
                 a.output);
    jobs.push_back({a.input, a.output, ""});
  }
  if (images && !fs::is_directory(a.input, ec)) jobs.push_back({a.input, a.output, ""});
  if (!a.labels.empty() && jobs.size() == 1 && fs::is_regular_file(a.labels, ec)) {
    jobs.front().label = a.labels;  // the labels of one file of images
  } else if (!a.labels.empty()) {
    TANDEM_CHECK(fs::is_directory(a.labels, ec), "--labels {}: not a folder", a.labels);
    for (ScanJob& j : jobs) {
      j.label = (fs::path(a.labels) / fs::path(j.input).filename()).string();
      TANDEM_CHECK(fs::is_regular_file(j.label, ec),
                   "--labels {}: no label for {} (a file of the same name, {})", a.labels, j.input,
                   j.label);
    }
  }
  for (const ScanJob& j : jobs) {
    TANDEM_CHECK(!images || !is_nifti(j.output),
                 "--output {}: the model takes images, not volumes; write .npy or .csv", j.output);
    TANDEM_CHECK(!is_nifti(j.output) || is_nifti(j.input),
                 "--output {}: a NIfTI result needs a NIfTI scan (its grid); {} is .npy, so "
                 "write .npy",
                 j.output, j.input);
    TANDEM_CHECK(!fs::exists(j.output, ec) || fs::is_regular_file(j.output, ec),
                 "--output {}: exists and is not a regular file", j.output);
  }
  return jobs;
}

// The scan [C,D,H,W] (a 3D array is one channel), checked for values a model cannot take.
torch::Tensor read_scan(const std::string& path) {
  torch::Tensor x = is_nifti(path) ? data::read_nifti(path).data : data::read_npy(path);
  TANDEM_CHECK(x.dim() == 3 || x.dim() == 4,
               "{}: a scan is [D,H,W] or [C,D,H,W], not an array of {} dimensions", path, x.dim());
  TANDEM_CHECK(
      x.is_floating_point() || x.scalar_type() == torch::kUInt8 || x.scalar_type() == torch::kInt64,
      "{}: voxels of type {} are not read", path, c10::toString(x.scalar_type()));
  if (x.dim() == 3) x = x.unsqueeze(0);
  x = x.to(torch::kFloat64);
  const int64_t bad = x.isfinite().logical_not().sum().item<int64_t>();
  TANDEM_CHECK(bad == 0, "{}: {} voxels are NaN or infinite; fix or mask them before predicting",
               path, bad);
  return x;
}

// The label of `scan` [C,D,H,W]: [D,H,W] (or [1,D,H,W]) on the scan's grid, as read.
torch::Tensor read_label(const std::string& path, const torch::Tensor& scan) {
  torch::Tensor y = is_nifti(path) ? data::read_nifti(path).data : data::read_npy(path);
  if (y.dim() == 4 && y.size(0) == 1) y = y[0];
  TANDEM_CHECK(y.dim() == 3 && y.size(0) == scan.size(1) && y.size(1) == scan.size(2) &&
                   y.size(2) == scan.size(3),
               "{}: the label has shape [{}], not the scan's grid [{},{},{}]", path,
               fmt::join(y.sizes(), ","), scan.size(1), scan.size(2), scan.size(3));
  return y;
}

// A float tensor as bytes (its dimensions, then its float64 elements) and back: how one process
// hands the scans it read to the others of an MPI job.
void pack(std::string& out, const torch::Tensor& t) {
  const torch::Tensor x = t.defined() ? t.to(torch::kFloat64).contiguous() : torch::Tensor();
  const int64_t dims = x.defined() ? x.dim() : -1;
  out.append(reinterpret_cast<const char*>(&dims), sizeof dims);
  if (!x.defined()) return;
  for (int64_t n : x.sizes()) out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(static_cast<const char*>(x.data_ptr()), x.numel() * sizeof(double));
}

torch::Tensor unpack(const std::string& in, size_t& at) {
  auto take = [&](void* to, size_t n) {
    TANDEM_ASSERT(at + n <= in.size(), "a packed scan ends early");
    std::memcpy(to, in.data() + at, n);
    at += n;
  };
  int64_t dims = 0;
  take(&dims, sizeof dims);
  if (dims < 0) return {};
  std::vector<int64_t> shape(static_cast<size_t>(dims));
  for (int64_t& n : shape) take(&n, sizeof n);
  torch::Tensor x = torch::empty(shape, torch::kFloat64);
  take(x.data_ptr(), x.numel() * sizeof(double));
  return x;
}

// The scan of `j` and its label (undefined without --labels), read by one process of the job
// (rank 0 under MPI) and handed to every other. Throws tandem::Error with the
// reader's message on every process when it could not read them.
std::pair<torch::Tensor, torch::Tensor> read_scan_and_label(const ScanJob& j, train::Job& job) {
  auto read = [&] {
    std::string out;
    try {
      const torch::Tensor scan = read_scan(j.input);
      const torch::Tensor label = j.label.empty() ? torch::Tensor() : read_label(j.label, scan);
      out = "S";
      pack(out, scan);
      pack(out, label);
    } catch (const std::exception& e) {
      out = std::string("E") + e.what();
    }
    return out;
  };
  const std::string got = job.once(read);
  TANDEM_CHECK(got.front() == 'S', "{}", got.substr(1));
  size_t at = 1;
  torch::Tensor scan = unpack(got, at);
  torch::Tensor label = unpack(got, at);
  return {scan, label};
}

// The result as written: probabilities float32, or a mask or labels as uint8. [K,D,H,W] in,
// [D,H,W] out where K is 1 or the classes are merged.
torch::Tensor as_kind(const torch::Tensor& p, const std::string& kind, double threshold,
                      const std::string& path) {
  if (kind == "probabilities") return p.size(0) == 1 ? p[0] : p;
  if (kind == "mask" || p.size(0) == 1) {
    TANDEM_CHECK(p.size(0) == 1,
                 "{}: the model predicts {} classes per voxel; a mask is of one, so use "
                 "--output-kind labels",
                 path, p.size(0));
    return p[0].ge(threshold).to(torch::kUInt8);
  }
  TANDEM_CHECK(p.size(0) <= 256, "{}: {} classes do not fit uint8 labels", path, p.size(0));
  return p.argmax(0).to(torch::kUInt8);
}

void write_result(const ScanJob& j, const torch::Tensor& result) {
  if (is_nifti(j.output)) {
    data::write_nifti_like(j.output, j.input, result,
                           result.scalar_type() == torch::kUInt8 ? data::NiftiType::kUInt8
                                                                 : data::NiftiType::kFloat32);
  } else {
    write_output_file(j.output, data::npy_bytes(result));
  }
}

int run_predict(PredictArgs& args) {
  train::Config& c = args.run.config;
  std::error_code ec;
  if (const int status = check_weights("predict", args.checkpoint, c)) return status;
  if (c.microbatches != 1 || c.replicas != 1) {
    std::fprintf(stderr,
                 "tandem: predict runs each scan as one sample: --microbatches and --replicas "
                 "must be 1 (split a scan with --spatial and --stages instead)\n");
    return kExitUsage;
  }
  std::vector<ScanJob> jobs;
  train::PredictOptions options;
  std::string normalization_origin;
  bool images = false;
  try {
    options.window.automatic = args.window == "auto";
    if (!options.window.automatic) options.window.size = parse_window(args.window);
    options.window.overlap = args.overlap;
    options.window.blend =
        args.blend == "constant" ? train::Blend::kConstant : train::Blend::kGaussian;
    options.window.batch = args.window_batch;
    options.mirror = parse_mirror(args.mirror);
    images = !train::predicts_volumes(c);
    TANDEM_CHECK(!images || !c.plan_only,
                 "--plan-only plans the forward of scans; for images, run the prediction");
    std::tie(options.normalization, normalization_origin) = predict_normalization(args, images);
    jobs = plan_jobs(args, images);
  } catch (const Error& e) {
    std::fprintf(stderr, "tandem: %s\n", e.what());
    return kExitUsage;
  }
  c.init_from = args.checkpoint;
  c.eval_only = true;
  Session session;
  if (const int status = join_job(args.run, session)) return status;
  train::Job& job = *session.job;
  if (!job.mpi() || job.rank() == 0)
    std::cout << fmt::format("{}inputs: {} ({})\n", job.prefix(),
                             data::describe(options.normalization), normalization_origin);
  if (images)
    return run_images(c, jobs,
                      {args.batch, args.kind, options.normalization, args.output,
                       fs::is_directory(args.input, ec)},
                      session);
  const bool folder = fs::is_directory(args.input, ec);
  const bool main_process = !job.mpi() || job.rank() == 0;
  std::vector<double> dices;  // per file with --labels, where this process writes
  for (size_t i = 0; i < jobs.size(); ++i) {
    const ScanJob& j = jobs[i];
    torch::Tensor scan, label;
    std::optional<train::PredictPlan> plan;
    train::PredictOptions o = options;
    o.path = j.input;
    try {
      std::tie(scan, label) = read_scan_and_label(j, job);
      plan.emplace(train::plan_prediction(c, scan.sizes().vec(), o));
    } catch (...) {
      return report_failure(train::When::kBeforeWork);
    }
    const int status = run_guarded(session, [&] {
      std::optional<trace::Progress> progress;  // opened by the first forward, with the total
      o.progress = forward_progress(progress, main_process, c.progress, i, jobs.size());
      train::VolumePrediction p = train::predict_volume(&job, c, std::move(*plan), scan, o);
      if (progress) progress->finish();
      if (main_process) {
        if (i == 0) std::cout << job.prefix() << "placement:\n" << p.placement;
        if (!p.note.empty()) std::cout << job.prefix() << "note: " << p.note << "\n";
        std::cout << std::flush;
      }
      if (c.plan_only) {
        if (main_process)
          std::cout << fmt::format(
              "{}plan: file={} shape={}x{}x{} padded={}x{}x{} windows={} window={}x{}x{} "
              "planned_peak={}\n",
              job.prefix(), j.input, p.grid.scan[0], p.grid.scan[1], p.grid.scan[2],
              p.grid.padded[0], p.grid.padded[1], p.grid.padded[2], p.windows, p.window[0],
              p.window[1], p.window[2], static_cast<uint64_t>(p.planned_bytes));
        return 0;
      }
      if (!p.output.defined()) return 0;  // another process runs the last stage
      if (folder) fs::create_directories(args.output);
      write_result(j, as_kind(p.output, args.kind, args.threshold, j.input));
      std::string dice;
      if (label.defined()) {
        const double d = train::label_dice(p.output, label, args.threshold);
        dices.push_back(d);
        dice = fmt::format(" dice={:.4f}", d);
      }
      std::string mem;
      if (p.planned_bytes > 0)
        mem += fmt::format(" planned_peak={}", static_cast<uint64_t>(p.planned_bytes));
      for (const auto& [name, bytes] : p.peak_bytes)
        mem += fmt::format(" peak_mem_{}={}", name, bytes);
      const double voxels = static_cast<double>(p.grid.scan[0] * p.grid.scan[1] * p.grid.scan[2]);
      const std::string windows = p.windows > 1 || p.window != p.grid.padded
                                      ? fmt::format(" windows={} window={}x{}x{}", p.windows,
                                                    p.window[0], p.window[1], p.window[2])
                                      : "";
      std::cout << fmt::format(
          "{}result: file={} shape={}x{}x{} padded={}x{}x{}{} seconds={:.2f} "
          "voxels_per_s={:.0f}{}{}\n",
          job.prefix(), j.output, p.grid.scan[0], p.grid.scan[1], p.grid.scan[2], p.grid.padded[0],
          p.grid.padded[1], p.grid.padded[2], windows, p.seconds,
          voxels / std::max(p.seconds, 1e-9), dice, mem);
      return 0;
    });
    if (status) return status;
  }
  if (!dices.empty() && jobs.size() > 1) {
    double sum = 0;
    for (double d : dices) sum += d;
    std::cout << fmt::format("{}mean: files={} dice={:.4f}\n", job.prefix(), dices.size(),
                             sum / static_cast<double>(dices.size()));
  }
  return 0;
}
}  // namespace

Runner add_predict(CLI::App& app) {
  auto args = std::make_shared<PredictArgs>();
  train::Config& c = args->run.config;
  c.microbatches = 1;  // a scan is one sample
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Apply a trained model to whole scans (NIfTI or .npy), each in one piece split across the "
      "devices (--spatial, --stages) or by sliding windows, and write its probabilities, mask or "
      "labels; or to images (IDX or .npy) for a model of images, written as .npy or CSV.");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "the weights: a save folder (its latest checkpoint), one step-N checkpoint in "
                  "it, or a state dict file; optional for an ONNX --model (its initializers)");
  cmd->add_option("--input", args->input,
                  "a scan (.nii, .nii.gz: 3D, or 4D with one channel per volume; .npy [D,H,W] "
                  "or [C,D,H,W]) or a folder of them")
      ->required();
  cmd->add_option("--output", args->output,
                  "the result: a file (.nii, .nii.gz on the scan's grid, or .npy), or a folder "
                  "for a folder of scans (same names)")
      ->required();
  cmd->add_option("--output-kind", args->kind,
                  "probabilities (float32) | mask (uint8 0/1 at --threshold) | labels (uint8, "
                  "the most probable class)")
      ->capture_default_str()
      ->check(CLI::IsMember({"probabilities", "mask", "labels"}));
  cmd->add_option("--standardize", args->standardize,
                  "default: as the checkpoint's training standardized (its record), else all. "
                  "all: a scan per channel over all its voxels (as nifti:DIR), images over all "
                  "their values | head: a scan over its voxels > 0 (as --data mri) | none: as "
                  "they are (inputs prepared beforehand)")
      ->check(CLI::IsMember({"all", "head", "none"}));
  add_config_option(*cmd, args->run, "plan_only", "",
                    "plan each scan's forward and stop before it runs: the grid, the windows, the "
                    "placement and the planned peak of the device that holds the most; with "
                    "--device-memory, status 3 where the plan is over it, naming the --spatial "
                    "or --window that fits");
  cmd->add_option("--threshold", args->threshold, "mask: the probability from which a voxel is 1")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--window", args->window,
                  "predict by sliding windows of D,H,W voxels (or one side for all three), each "
                  "a sample split as --spatial and --stages say; auto: the largest windows whose "
                  "forward plans within --device-memory, where the whole scan does not; "
                  "default: the whole scan in one piece");
  cmd->add_option("--overlap", args->overlap,
                  "windows: the share of a window its neighbour covers too, in [0, 1)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999));
  cmd->add_option("--blend", args->blend,
                  "windows: how overlapping windows are averaged: gaussian (weights of sigma "
                  "1/8 of the window about its centre) | constant (equal weights)")
      ->capture_default_str()
      ->check(CLI::IsMember({"constant", "gaussian"}));
  cmd->add_option("--window-batch", args->window_batch, "windows: how many go through at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mirror", args->mirror,
                  "average the predictions of the scan flipped along every subset of these axes "
                  "(D,H,W or a part of them: 2^n forwards), each flipped back");
  cmd->add_option("--labels", args->labels,
                  "a folder of labels named as the scans: each result's Dice against its label "
                  "(the mask at --threshold against label > 0; several classes: the mean over "
                  "classes 1..K-1), and the mean over files; for images, a file of their classes "
                  "(IDX or .npy): the accuracy");
  cmd->add_option("--batch", args->batch, "images (a model of no volumes): images per forward")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_config_option(*cmd, args->run, "progress");
  // The model and its shape; the graph output the loss reads is --graph-output here, since
  // --output is the result's file.
  for (const train::ConfigOption& o : train::config_options())
    if (o.group == train::OptionGroup::kModel)
      add_config_option(*cmd, args->run, o.field, o.field == "output" ? "--graph-output" : "");
  cmd->footer("\n" + flag_words(train::catalog_help()));
  add_option_group(*cmd, args->run, train::OptionGroup::kPlacement);
  add_config_option(*cmd, args->run, "seed", "", "seed (dropout is off; it only names the run)");
  return [args]() { return run_predict(*args); };
}

}  // namespace tandem::cli
