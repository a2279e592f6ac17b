// tandem predict for models of images: IDX or .npy images in, probabilities or labels out as
// .npy or CSV, the accuracy against labels.
#include "predict_images.h"

#include <filesystem>
#include <iostream>
#include <optional>

#include "commands.h"
#include "common/output_path.h"
#include "tandem/common/check.h"
#include "tandem/data/idx.h"
#include "tandem/data/npy.h"
#include "tandem/trace/progress.h"
#include "tandem/train/job.h"

namespace tandem::cli {

namespace {

// Images [N,...] as the model's training data had them: unsigned bytes / 255 (as --data mnist
// reads its IDX files), any other type as it is; checked for values a model cannot take.
torch::Tensor read_images(const std::string& path) {
  torch::Tensor x = ends_with(path, ".npy") ? data::read_npy(path) : data::read_idx(path);
  TANDEM_CHECK(x.dim() >= 2, "{}: images are [N,...], not an array of {} dimension", path, x.dim());
  x = x.scalar_type() == torch::kUInt8 ? x.to(torch::kFloat32).div_(255.0f) : x.to(torch::kFloat32);
  const int64_t bad = x.isfinite().logical_not().sum().item<int64_t>();
  TANDEM_CHECK(bad == 0, "{}: {} values are NaN or infinite", path, bad);
  return x;
}

// The class of each of `n` images: [N] integers.
torch::Tensor read_classes(const std::string& path, int64_t n) {
  torch::Tensor y = ends_with(path, ".npy") ? data::read_npy(path) : data::read_idx(path);
  TANDEM_CHECK(y.dim() == 1 && y.size(0) == n && !y.is_floating_point(),
               "{}: labels of {} images are [{}] integers, not [{}] {}", path, n, n,
               fmt::join(y.sizes(), ","), c10::toString(y.scalar_type()));
  return y.to(torch::kInt64);
}

// The result of images: [N,K] probabilities as .npy (float32) or CSV (a header, one row per
// image), or [N] labels (the most probable class).
void write_images_result(const std::string& path, const torch::Tensor& p, const std::string& kind) {
  TANDEM_CHECK(kind != "mask", "--output-kind mask is for volumes; for images use labels");
  const bool labels = kind == "labels";
  if (labels)
    TANDEM_CHECK(p.dim() == 2, "labels need [N,K] class scores, not [{}]",
                 fmt::join(p.sizes(), ","));
  const torch::Tensor out = labels ? p.argmax(1) : p;
  if (ends_with(path, ".npy")) {
    write_output_file(path, data::npy_bytes(labels ? out : out.to(torch::kFloat32)));
    return;
  }
  TANDEM_CHECK(out.dim() <= 2, "{}: a CSV holds one row per image, but each result is [{}]", path,
               fmt::join(out.sizes().slice(1), ","));
  std::string text;
  if (labels) {
    text = "label\n";
    for (int64_t v :
         std::vector<int64_t>(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel()))
      text += fmt::format("{}\n", v);
  } else {
    const torch::Tensor q = out.reshape({out.size(0), -1}).contiguous();
    for (int64_t k = 0; k < q.size(1); ++k) text += fmt::format("{}class_{}", k ? "," : "", k);
    text += "\n";
    const float* v = q.data_ptr<float>();
    for (int64_t i = 0; i < q.size(0); ++i) {
      for (int64_t k = 0; k < q.size(1); ++k)
        text += fmt::format("{}{:.9g}", k ? "," : "", v[i * q.size(1) + k]);
      text += "\n";
    }
  }
  write_output_file(path, text);
}

}  // namespace

std::function<void(int64_t, int64_t)> forward_progress(std::optional<trace::Progress>& progress,
                                                       bool show, trace::Progress::Mode mode,
                                                       size_t file, size_t files) {
  return [&progress, show, mode, file, files](int64_t done, int64_t total) {
    if (!progress) {
      progress.emplace(show ? mode : trace::Progress::Mode::kNone, total);
      progress->set_unit("forward", "forwards");
    }
    progress->update(done,
                     {{"file", static_cast<double>(file + 1)}, {"of", static_cast<double>(files)}});
  };
}

int run_images(const train::Config& c, const std::vector<ScanJob>& jobs, const ImagesOptions& o,
               Session& session) {
  train::Job& job = *session.job;
  const bool main_process = !job.mpi() || job.rank() == 0;
  std::vector<double> accuracies;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const ScanJob& j = jobs[i];
    torch::Tensor x, classes;
    try {
      x = read_images(j.input);
      if (!j.label.empty()) classes = read_classes(j.label, x.size(0));
    } catch (...) {
      return report_failure(train::When::kBeforeWork);
    }
    const int status = run_guarded(session, [&] {
      std::optional<trace::Progress> progress;
      const auto on_forward = forward_progress(progress, main_process, c.progress, i, jobs.size());
      train::ImagesPrediction p =
          train::predict_images(&job, c, x, o.batch, o.normalization, on_forward);
      if (progress) progress->finish();
      if (main_process && i == 0)
        std::cout << job.prefix() << "placement:\n" << p.placement << std::flush;
      if (!p.output.defined()) return 0;
      if (o.folder) std::filesystem::create_directories(o.output);
      write_images_result(j.output, p.output, o.kind);
      std::string accuracy;
      if (classes.defined()) {
        const double a = p.output.argmax(1).eq(classes).to(torch::kFloat64).mean().item<double>();
        accuracies.push_back(a);
        accuracy = fmt::format(" accuracy={:.4f}", a);
      }
      std::string mem;
      for (const auto& [name, bytes] : p.peak_bytes)
        mem += fmt::format(" peak_mem_{}={}", name, bytes);
      std::cout << fmt::format(
          "{}result: file={} images={} seconds={:.2f} images_per_s={:.0f}{}{}\n", job.prefix(),
          j.output, x.size(0), p.seconds,
          static_cast<double>(x.size(0)) / std::max(p.seconds, 1e-9), accuracy, mem);
      return 0;
    });
    if (status) return status;
  }
  if (accuracies.size() > 1) {
    double sum = 0;
    for (double a : accuracies) sum += a;
    std::cout << fmt::format("{}mean: files={} accuracy={:.4f}\n", job.prefix(), accuracies.size(),
                             sum / static_cast<double>(accuracies.size()));
  }
  return 0;
}

}  // namespace tandem::cli
