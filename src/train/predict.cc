#include "tandem/train/predict.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <utility>

#include "data/moments.h"
#include "data/normalize.h"
#include "predict_memory.h"
#include "tandem/common/check.h"
#include "tandem/data/mri.h"
#include "tandem/data/nifti_folder.h"
#include "tandem/graph/call_context.h"
#include "tandem/memory/bytes.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/train/catalog.h"
#include "tandem/train/job.h"

namespace tandem::train {
namespace {

// The samples of one forward (a padded scan, a batch of windows or of images) as the trainer's
// data: the same samples for training and held out, with no target (a prediction reads none, and
// the memory plan's measurement reads the input only).
class Samples : public Source {
 public:
  explicit Samples(torch::Tensor samples) : samples_(std::move(samples)) {}
  int64_t train_size() const override { return samples_.size(0); }
  int64_t test_size() const override { return samples_.size(0); }
  Batch train_batch(int64_t, int64_t begin, int64_t end) const override {
    return {samples_.narrow(0, begin, end - begin), torch::Tensor()};
  }
  Batch test_batch(int64_t begin, int64_t end) const override { return train_batch(0, begin, end); }
  std::string describe() const override {
    return fmt::format("{} sample{} [{}] to predict (standardized)", samples_.size(0),
                       samples_.size(0) > 1 ? "s" : "", fmt::join(input_shape(), ","));
  }
  std::vector<int64_t> input_shape() const override { return samples_.sizes().slice(1).vec(); }
  int64_t sample_bytes() const override {
    return samples_[0].numel() * static_cast<int64_t>(samples_.element_size());
  }

 private:
  torch::Tensor samples_;  // [N,C,D,H,W] windows, or [N,...] images
};

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

std::vector<int64_t> padded_shape(const std::vector<int64_t>& shape, const VolumeGrid& g) {
  return {shape[0], g.padded[0], g.padded[1], g.padded[2]};
}

// The model of `c` for samples of `shape`, built from the seed as the trainer builds it.
graph::Model model_for(const Config& c, const std::vector<int64_t>& shape) {
  torch::manual_seed(c.seed);
  return make_model(c, shape);
}

}  // namespace

// The grid of a scan of `shape` and the model for its padded samples, built once where the
// model's own down-sampling does not change the grid.
std::pair<VolumeGrid, graph::Model> grid_and_model(const Config& c,
                                                   const std::vector<int64_t>& shape) {
  TANDEM_CHECK(shape.size() == 4, "a scan is [C,D,H,W], not [{}]", fmt::join(shape, ","));
  const ModelNeeds needs = model_needs(c);
  VolumeGrid g;
  g.multiple = std::max<int64_t>(1, needs.divisor);
  for (int i = 0; i < 3; ++i) g.scan[static_cast<size_t>(i)] = shape[static_cast<size_t>(i) + 1];
  auto pad = [&] {
    for (size_t i = 0; i < 3; ++i) g.padded[i] = round_up(g.scan[i], g.multiple);
  };
  pad();
  // An ONNX graph says its down-sampling only once loaded (graph::Model::slab_multiple).
  graph::Model model = model_for(c, padded_shape(shape, g));
  TANDEM_CHECK(model.slab_dim >= 0,
               "Config::model = {} takes no volumes; predicting whole scans needs a model of "
               "volumes",
               c.model);
  if (model.slab_multiple > 1 && g.multiple % model.slab_multiple != 0) {
    g.multiple = std::lcm(g.multiple, model.slab_multiple);
    pad();
    model = model_for(c, padded_shape(shape, g));
  }
  return {g, std::move(model)};
}

VolumeGrid volume_grid(const Config& c, const std::vector<int64_t>& shape) {
  return grid_and_model(c, shape).first;
}

std::vector<int64_t> window_starts(int64_t size, int64_t window, double overlap) {
  TANDEM_CHECK(window >= 1 && window <= size, "a window of {} planes does not fit {} planes",
               window, size);
  TANDEM_CHECK(overlap >= 0 && overlap < 1, "the windows' overlap must be in [0, 1), not {}",
               overlap);
  // The small term keeps 0.7 x 10 at 7, not 6.999...
  const auto step = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(static_cast<double>(window) * (1 - overlap) + 1e-9)));
  const int64_t n = (size - window + step - 1) / step + 1;
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < n; ++i) starts.push_back(std::min(i * step, size - window));
  return starts;
}

torch::Tensor window_weights(const std::array<int64_t, 3>& size, Blend blend) {
  auto axis = [&](int64_t n) {
    if (blend == Blend::kConstant) return torch::ones({n}, torch::kFloat64);
    const double centre = static_cast<double>(n - 1) / 2;
    const double sigma = static_cast<double>(n) / 8;
    return torch::exp(-(torch::arange(n, torch::kFloat64) - centre).pow(2) / (2 * sigma * sigma));
  };
  return (axis(size[0]).view({-1, 1, 1}) * axis(size[1]).view({1, -1, 1}) *
          axis(size[2]).view({1, 1, -1}))
      .to(torch::kFloat32);
}

double label_dice(const torch::Tensor& p, const torch::Tensor& label, double threshold) {
  TANDEM_CHECK(p.dim() == 4 && label.dim() == 3 && p.sizes().slice(1) == label.sizes(),
               "a prediction [{}] and a label [{}] on different grids", fmt::join(p.sizes(), ","),
               fmt::join(label.sizes(), ","));
  auto dice = [](const torch::Tensor& a, const torch::Tensor& b) {
    const double both = a.logical_and(b).sum().item<double>();
    const double total = a.sum().item<double>() + b.sum().item<double>();
    return total == 0 ? 1.0 : 2 * both / total;
  };
  if (p.size(0) == 1) return dice(p[0].ge(threshold), label.gt(0));
  const torch::Tensor classes = p.argmax(0);
  const torch::Tensor truth = label.to(torch::kInt64);
  double sum = 0;
  for (int64_t k = 1; k < p.size(0); ++k) sum += dice(classes.eq(k), truth.eq(k));
  return sum / static_cast<double>(p.size(0) - 1);
}

namespace {

// The sides of the samples an ONNX graph exported with fixed spatial axes takes (-1 for a
// dynamic axis), or none when every spatial axis is dynamic.
std::optional<std::array<int64_t, 3>> fixed_sides(const graph::Model& model) {
  const std::vector<int64_t>& s = model.input_shape;
  if (s.size() != 4 || (s[1] < 0 && s[2] < 0 && s[3] < 0)) return std::nullopt;
  return std::array<int64_t, 3>{s[1], s[2], s[3]};
}

bool takes(const std::array<int64_t, 3>& fixed, const std::array<int64_t, 3>& w) {
  for (size_t i = 0; i < 3; ++i)
    if (fixed[i] >= 0 && fixed[i] != w[i]) return false;
  return true;
}

// The windows' size for `o` (or the fixed size of the model), checked against the scan and the
// model's multiple; the padded grid when the scan goes in one piece.
std::array<int64_t, 3> window_size(const Config& c, const graph::Model& model, const VolumeGrid& g,
                                   const PredictOptions& o, std::string& note) {
  std::array<int64_t, 3> w = o.window.size;
  const std::optional<std::array<int64_t, 3>> fixed = fixed_sides(model);
  const bool given = w != std::array<int64_t, 3>{};
  if (!given && (!fixed || takes(*fixed, g.padded))) return g.padded;
  const std::string sides =
      fixed ? fmt::format("{}x{}x{}", (*fixed)[0], (*fixed)[1], (*fixed)[2]) : "";
  if (!given) {
    TANDEM_CHECK((*fixed)[0] >= 0 && (*fixed)[1] >= 0 && (*fixed)[2] >= 0,
                 "{} takes samples of {} (-1: any size), but the scan padded to the model's "
                 "multiple is {}x{}x{}: export it again with dynamic D, H and W axes "
                 "(docs/predict.md)",
                 c.model, sides, g.padded[0], g.padded[1], g.padded[2]);
    w = *fixed;
    note = fmt::format(
        "{} takes samples of {} only (exported with fixed spatial axes): predicting by windows "
        "of that size; export it with dynamic D, H and W axes to predict a scan in one piece "
        "(docs/predict.md)",
        c.model, sides);
  }
  static const char* const kAxis[] = {"D", "H", "W"};
  for (size_t i = 0; i < 3; ++i) {
    TANDEM_CHECK(w[i] >= 1, "--window {}x{}x{}: every side must be at least 1", w[0], w[1], w[2]);
    TANDEM_CHECK(w[i] <= g.scan[i],
                 "{}: the window {}x{}x{} is larger than the scan {}x{}x{} along {}: use a window "
                 "of at most the scan's size",
                 o.path, w[0], w[1], w[2], g.scan[0], g.scan[1], g.scan[2], kAxis[i]);
    TANDEM_CHECK(w[i] % g.multiple == 0,
                 "--window {}x{}x{}: {} is not a multiple of {}, the model's down-sampling; use {} "
                 "or {}",
                 w[0], w[1], w[2], w[i], g.multiple,
                 std::max(g.multiple, w[i] / g.multiple * g.multiple),
                 (w[i] / g.multiple + 1) * g.multiple);
  }
  TANDEM_CHECK(!fixed || takes(*fixed, w),
               "{} takes samples of {} only (exported with fixed spatial axes; -1: any size), not "
               "windows of {}x{}x{}: give a window of that size, or export it with dynamic D, H "
               "and W axes (docs/predict.md)",
               c.model, sides, w[0], w[1], w[2]);
  return w;
}

// Where every window starts, in order (D slowest).
std::vector<std::array<int64_t, 3>> window_origins(const std::array<int64_t, 3>& grid,
                                                   const std::array<int64_t, 3>& w,
                                                   double overlap) {
  const auto d = window_starts(grid[0], w[0], overlap);
  const auto h = window_starts(grid[1], w[1], overlap);
  const auto x = window_starts(grid[2], w[2], overlap);
  std::vector<std::array<int64_t, 3>> origins;
  for (int64_t a : d)
    for (int64_t b : h)
      for (int64_t e : x) origins.push_back({a, b, e});
  return origins;
}

torch::Tensor window_of(const torch::Tensor& t, const std::array<int64_t, 3>& at,
                        const std::array<int64_t, 3>& w, int64_t first_axis) {
  return t.narrow(first_axis, at[0], w[0])
      .narrow(first_axis + 1, at[1], w[1])
      .narrow(first_axis + 2, at[2], w[2]);
}

}  // namespace

PredictPlan plan_prediction(const Config& c, const std::vector<int64_t>& shape,
                            const PredictOptions& o) {
  TANDEM_CHECK(shape.size() == 4, "a scan is [C,D,H,W], not [{}]", fmt::join(shape, ","));
  TANDEM_CHECK(o.window.batch >= 1, "--window-batch must be at least 1, not {}", o.window.batch);
  for (int a : o.mirror)
    TANDEM_CHECK(a >= 0 && a <= 2, "--mirror takes the axes 0, 1 and 2 (D, H, W), not {}", a);
  TANDEM_CHECK(!o.window.automatic || c.device_memory > 0,
               "--window auto picks the largest windows whose forward plans within "
               "Config::device_memory: give Config::device_memory");
  const bool sized = o.window.size != std::array<int64_t, 3>{};
  TANDEM_CHECK(!o.window.automatic || !sized,
               "--window auto chooses the windows' size itself: give a size or auto, not both");
  auto [grid, model] = grid_and_model(c, shape);
  const std::vector<int64_t>& takes = model.input_shape;
  TANDEM_CHECK(takes.empty() || takes[0] < 0 || takes[0] == shape[0],
               "{}: the scan has {} channel{}, but model {} takes {}: give scans of {} channel{} "
               "(NIfTI: a 4D file holds one channel per volume; .npy: [C,D,H,W])",
               o.path.empty() ? std::string("the scan") : o.path, shape[0],
               shape[0] == 1 ? "" : "s", c.model, takes[0], takes[0], takes[0] == 1 ? "" : "s");
  PredictPlan p{grid, {}, {}, {}, std::move(model)};
  p.window = window_size(c, p.model, p.grid, o, p.note);
  const bool one_piece = p.window == p.grid.padded && o.window.size == std::array<int64_t, 3>{};
  if (!one_piece) {
    p.grid.padded = p.grid.scan;  // windows lie inside the scan
    p.model = model_for(c, {shape[0], p.window[0], p.window[1], p.window[2]});
  }
  p.origins = window_origins(p.grid.padded, p.window, one_piece ? 0.0 : o.window.overlap);
  return p;
}

VolumePrediction predict_volume(Job* job, Config c, const torch::Tensor& image,
                                const PredictOptions& o) {
  TANDEM_CHECK(image.defined() && image.dim() == 4, "a scan is [C,D,H,W], not {} dims",
               image.defined() ? image.dim() : 0);
  PredictPlan plan = plan_prediction(c, image.sizes().vec(), o);
  return predict_volume(job, std::move(c), std::move(plan), image, o);
}

VolumePrediction predict_volume(Job* job, Config c, PredictPlan plan, const torch::Tensor& image,
                                const PredictOptions& o) {
  const Config given = c;
  const bool planned = image.defined() && image.dim() == 4 && image.size(1) == plan.grid.scan[0] &&
                       image.size(2) == plan.grid.scan[1] && image.size(3) == plan.grid.scan[2];
  TANDEM_CHECK(planned, "the scan [{}] is not the one the prediction was planned for",
               image.defined() ? fmt::format("{}", fmt::join(image.sizes(), ",")) : "");
  VolumePrediction out;
  out.grid = plan.grid;
  out.note = plan.note;
  out.window = plan.window;
  const VolumeGrid& g = out.grid;
  const std::array<int64_t, 3>& w = out.window;
  const std::vector<std::array<int64_t, 3>>& origins = plan.origins;
  out.windows = static_cast<int64_t>(origins.size());
  graph::Model& model = plan.model;
  const int64_t batch = std::min(o.window.batch, out.windows);
  // A batch of windows is a batch of samples; nothing trains.
  c.batch = static_cast<int>(batch);
  c.microbatches = 1;
  c.eval_only = true;
  c.volume = static_cast<int>(w[0]);
  torch::Tensor x = data::normalized(image, o.normalization, o.path);
  x = torch::constant_pad_nd(
      x, {0, g.padded[2] - g.scan[2], 0, g.padded[1] - g.scan[1], 0, g.padded[0] - g.scan[0]});
  auto samples = [&](int64_t first, int64_t n) {
    std::vector<torch::Tensor> parts;
    for (int64_t i = first; i < first + n; ++i)
      parts.push_back(window_of(x, origins[static_cast<size_t>(i)], w, 1));
    return torch::stack(parts).contiguous();
  };
  const torch::Tensor first = samples(0, batch);
  // The plan measures a copy on the CPU: the pipeline's may be on other devices.
  const std::optional<graph::Model> measured =
      c.device_memory > 0 || c.plan_only ? std::optional<graph::Model>(graph::copy_model(model))
                                         : std::nullopt;
  std::unique_ptr<Trainer> trainer =
      job ? job->trainer(c, std::move(model), std::make_unique<Samples>(first))
          : std::make_unique<Trainer>(c, std::move(model), std::make_unique<Samples>(first));
  runtime::Pipeline& pipeline = trainer->pipeline();
  out.placement = pipeline.placement_table();
  if (measured) {
    // The forward's plan against the budget, before it runs.
    const ForwardLayout layout{pipeline.partition(), pipeline.stage_device(), pipeline.slabs(),
                               graph::workspace_bound(c.device_memory), compute_type(c.precision)};
    const auto budget = static_cast<double>(c.device_memory);
    out.planned_bytes = forward_bytes(*measured, first, layout, job);
    if (c.device_memory > 0 && out.planned_bytes > budget) {
      const std::vector<int64_t> shape = first.sizes().vec();
      const bool one_piece = w == g.padded && plan.note.empty();
      if (o.window.automatic && one_piece) {
        const ForwardFit fit =
            largest_window(*measured, shape, layout, g.scan, g.multiple, budget, job);
        if (fit.window != std::array<int64_t, 3>{}) {
          trainer.reset();
          PredictOptions by_windows = o;
          by_windows.window.automatic = false;
          by_windows.window.size = fit.window;
          PredictPlan windows = plan_prediction(given, image.sizes().vec(), by_windows);
          windows.note = fmt::format(
              "{} in one piece plans {} per device, over Config::device_memory = {}: by windows "
              "of {}x{}x{}, the largest that plan within it ({})",
              o.path, memory::format_bytes(static_cast<uint64_t>(out.planned_bytes)),
              memory::format_bytes(c.device_memory), fit.window[0], fit.window[1], fit.window[2],
              memory::format_bytes(static_cast<uint64_t>(fit.window_bytes)));
          return predict_volume(job, given, std::move(windows), image, by_windows);
        }
      }
      const ForwardFit fit = forward_fit(*measured, shape, layout, g.scan, g.multiple, budget, job);
      const int groups =
          1 + *std::max_element(layout.stage_group.begin(), layout.stage_group.end());
      throw memory::DoesNotFit(fmt::format(
          "{}: predicting {} plans {} on the device that holds the most, over "
          "Config::device_memory = {}. {}; {}; or a larger Config::device_memory",
          o.path,
          one_piece ? fmt::format("the scan in one piece ({}x{}x{})", w[0], w[1], w[2])
                    : fmt::format("by windows of {}x{}x{}", w[0], w[1], w[2]),
          memory::format_bytes(static_cast<uint64_t>(out.planned_bytes)),
          memory::format_bytes(c.device_memory),
          fit.spatial ? fmt::format("Config::spatial = {} would plan {} per device ({} devices)",
                                    fit.spatial,
                                    memory::format_bytes(static_cast<uint64_t>(fit.spatial_bytes)),
                                    fit.spatial * groups)
                      : fmt::format("no Config::spatial up to 16 fits"),
          fit.window != std::array<int64_t, 3>{}
              ? fmt::format("windows of {}x{}x{} would plan {} (--window {},{},{}, or --window "
                            "auto)",
                            fit.window[0], fit.window[1], fit.window[2],
                            memory::format_bytes(static_cast<uint64_t>(fit.window_bytes)),
                            fit.window[0], fit.window[1], fit.window[2])
              : "no window fits either"));
    }
  }
  if (c.plan_only) return out;  // planned, and nothing run
  std::vector<uint64_t> peak(pipeline.devices().size(), 0);
  // One forward of `xb` [n,C,w]: the prediction [n,K,w] float32, or undefined in a process
  // without the output.
  auto forward = [&](const torch::Tensor& xb, int64_t n) {
    runtime::Prediction p = pipeline.predict(pipeline.needs_input() ? xb : torch::Tensor(), n);
    for (size_t d = 0; d < p.stats.peak_bytes.size() && d < peak.size(); ++d)
      peak[d] = std::max(peak[d], p.stats.peak_bytes[d]);
    if (!p.output.defined()) return torch::Tensor();
    torch::Tensor y =
        pipeline.model().prediction ? pipeline.model().prediction(p.output) : p.output;
    TANDEM_CHECK(
        y.dim() == 5 && y.size(2) == w[0] && y.size(3) == w[1] && y.size(4) == w[2],
        "{}'s output has shape [{}]; predicting a scan needs an output of [{},K,{},{},{}], "
        "one value per voxel of its input",
        c.model, fmt::join(y.sizes(), ","), n, w[0], w[1], w[2]);
    return y.to(torch::kFloat32);
  };
  const int64_t mirrorings = int64_t{1} << o.mirror.size();
  const int64_t forwards = (out.windows + batch - 1) / batch * mirrorings;
  int64_t done = 0;
  const torch::Tensor weights =
      out.windows > 1 ? window_weights(w, o.window.blend) : torch::Tensor();
  torch::Tensor sum, norm;  // the weighted predictions and the weights, on the padded grid
  torch::Tensor whole;      // the prediction of a scan in one window
  const auto started = std::chrono::steady_clock::now();
  for (int64_t first = 0; first < out.windows; first += batch) {
    const int64_t n = std::min(batch, out.windows - first);
    const torch::Tensor xb = samples(first, n);
    torch::Tensor yb;
    for (int64_t m = 0; m < mirrorings; ++m) {
      std::vector<int64_t> dims;  // the flipped axes of [n,C,D,H,W]
      for (size_t a = 0; a < o.mirror.size(); ++a)
        if (m >> a & 1) dims.push_back(o.mirror[a] + 2);
      torch::Tensor y = forward(dims.empty() ? xb : xb.flip(dims), n);
      if (o.progress) o.progress(++done, forwards);
      if (!y.defined()) continue;
      if (!dims.empty()) y = y.flip(dims);
      yb = yb.defined() ? yb + y : y;
    }
    if (!yb.defined()) continue;
    if (mirrorings > 1) yb = yb / static_cast<double>(mirrorings);
    if (out.windows == 1) {
      whole = yb[0];
      continue;
    }
    if (!sum.defined()) {
      sum = torch::zeros({yb.size(1), g.padded[0], g.padded[1], g.padded[2]}, torch::kFloat32);
      norm = torch::zeros({g.padded[0], g.padded[1], g.padded[2]}, torch::kFloat32);
    }
    for (int64_t i = 0; i < n; ++i) {
      const auto& at = origins[static_cast<size_t>(first + i)];
      window_of(sum, at, w, 1).add_(yb[i] * weights);
      window_of(norm, at, w, 0).add_(weights);
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (size_t d = 0; d < peak.size(); ++d)
    if (peak[d]) out.peak_bytes.emplace_back(pipeline.devices()[d].name, peak[d]);
  if (!whole.defined() && !sum.defined()) return out;
  const torch::Tensor y = whole.defined() ? whole : sum / norm;
  out.output =
      y.narrow(1, 0, g.scan[0]).narrow(2, 0, g.scan[1]).narrow(3, 0, g.scan[2]).contiguous();
  return out;
}

bool predicts_volumes(const Config& c) {
  const ModelNeeds needs = model_needs(c);
  if (!needs.any_data) return needs.volumes;
  // An ONNX graph takes what its input says: [C,D,H,W] samples are volumes.
  return model_for(c, {1}).input_shape.size() == 4;
}

ImagesPrediction predict_images(Job* job, Config c, const torch::Tensor& images, int64_t batch,
                                const data::Normalization& normalization,
                                const std::function<void(int64_t, int64_t)>& progress) {
  TANDEM_CHECK(!normalization.head,
               "images are standardized over all their values, or not at all; over the values > "
               "0 (head) is for scans");
  TANDEM_CHECK(images.defined() && images.dim() >= 2 && images.size(0) >= 1,
               "images are [N,...] with N at least 1, not [{}]",
               images.defined() ? fmt::format("{}", fmt::join(images.sizes(), ",")) : "");
  TANDEM_CHECK(batch >= 1, "--batch must be at least 1, not {}", batch);
  const int64_t n = images.size(0);
  batch = std::min(batch, n);
  graph::Model model = model_for(c, images.sizes().slice(1).vec());
  torch::Tensor x = images.to(torch::kFloat32);
  data::Normalization norm = normalization;
  if (norm.mode == data::Normalize::kDataset && norm.mean.empty()) {  // the given images' moments
    const data::Moments m = data::moments(x);
    norm.mean = {m.mean};
    norm.deviation = {m.stddev};
  }
  // kPerImage: an image is one channel of all its values (as --data mnist and npy:DIR do it).
  x = norm.mode == data::Normalize::kPerImage
          ? data::normalized_each(x.reshape({x.size(0), 1, -1}), norm).reshape(x.sizes())
          : data::normalized_each(x, norm);
  x = graph::fit_input(model, x).contiguous();
  c.batch = static_cast<int>(batch);
  c.microbatches = 1;
  c.eval_only = true;
  std::unique_ptr<Trainer> trainer =
      job ? job->trainer(c, std::move(model), std::make_unique<Samples>(x.narrow(0, 0, batch)))
          : std::make_unique<Trainer>(c, std::move(model),
                                      std::make_unique<Samples>(x.narrow(0, 0, batch)));
  runtime::Pipeline& pipeline = trainer->pipeline();
  ImagesPrediction out;
  out.placement = pipeline.placement_table();
  std::vector<uint64_t> peak(pipeline.devices().size(), 0);
  std::vector<torch::Tensor> parts;
  const int64_t forwards = (n + batch - 1) / batch;
  const auto started = std::chrono::steady_clock::now();
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t k = std::min(batch, n - first);
    runtime::Prediction p =
        pipeline.predict(pipeline.needs_input() ? x.narrow(0, first, k) : torch::Tensor(), k);
    for (size_t d = 0; d < p.stats.peak_bytes.size() && d < peak.size(); ++d)
      peak[d] = std::max(peak[d], p.stats.peak_bytes[d]);
    if (progress) progress(first / batch + 1, forwards);
    if (!p.output.defined()) continue;
    torch::Tensor y =
        pipeline.model().prediction ? pipeline.model().prediction(p.output) : p.output;
    parts.push_back(y.to(torch::kFloat32));
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (size_t d = 0; d < peak.size(); ++d)
    if (peak[d]) out.peak_bytes.emplace_back(pipeline.devices()[d].name, peak[d]);
  if (!parts.empty()) out.output = torch::cat(parts, 0).contiguous();
  return out;
}

}  // namespace tandem::train
