#include "tandem/train/predict.h"

#include <torch/torch.h>

#include <chrono>
#include <numeric>
#include <utility>

#include "tandem/common/check.h"
#include "tandem/data/mri.h"
#include "tandem/data/nifti_folder.h"
#include "tandem/train/catalog.h"
#include "tandem/train/job.h"

namespace tandem::train {
namespace {

// One padded scan as the trainer's data: the same sample for training and held out, with no
// target (a prediction reads none, and the memory plan's measurement reads the input only).
class OneScan : public Source {
 public:
  explicit OneScan(torch::Tensor scan) : scan_(std::move(scan)) {}
  int64_t train_size() const override { return 1; }
  int64_t test_size() const override { return 1; }
  Batch train_batch(int64_t, int64_t begin, int64_t end) const override {
    return {scan_.narrow(0, begin, end - begin), torch::Tensor()};
  }
  Batch test_batch(int64_t begin, int64_t end) const override { return train_batch(0, begin, end); }
  std::string describe() const override {
    return fmt::format("one scan [{}] (padded, standardized)", fmt::join(input_shape(), ","));
  }
  std::vector<int64_t> input_shape() const override {
    return {scan_.size(1), scan_.size(2), scan_.size(3), scan_.size(4)};
  }
  int64_t sample_bytes() const override { return scan_.numel() * scan_.element_size(); }

 private:
  torch::Tensor scan_;  // [1,C,D,H,W]
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

VolumePrediction predict_volume(Job* job, Config c, const torch::Tensor& image,
                                Standardize standardize, const std::string& path) {
  TANDEM_CHECK(image.defined() && image.dim() == 4, "a scan is [C,D,H,W], not {} dims",
               image.defined() ? image.dim() : 0);
  const std::vector<int64_t> shape(image.sizes().begin(), image.sizes().end());
  VolumePrediction out;
  auto [grid, model] = grid_and_model(c, shape);
  out.grid = grid;
  const VolumeGrid& g = out.grid;
  // One scan is one sample; nothing trains.
  c.batch = 1;
  c.microbatches = 1;
  c.eval_only = true;
  c.volume = static_cast<int>(g.padded[0]);
  torch::Tensor x = standardize == Standardize::kHead ? data::head_standardized(image, path)
                                                      : data::standardized(image);
  x = torch::constant_pad_nd(
      x, {0, g.padded[2] - g.scan[2], 0, g.padded[1] - g.scan[1], 0, g.padded[0] - g.scan[0]});
  x = x.unsqueeze(0).contiguous();
  if (!model.input_shape.empty()) {
    const std::vector<int64_t> want = model.input_shape;
    bool fixed = want.size() == 4;
    for (size_t i = 1; fixed && i < 4; ++i) fixed = want[i] < 0 || want[i] == x.size(i + 1);
    TANDEM_CHECK(fixed,
                 "{} takes samples of [{}] (-1: any size), but the scan padded to the model's "
                 "multiple is [{}]: a graph exported with fixed spatial axes takes only its "
                 "training crop; export it again with dynamic D, H and W axes (docs/predict.md)",
                 c.model, fmt::join(want, ","), fmt::join(x.sizes().slice(1), ","));
  }
  auto source = std::make_unique<OneScan>(x);
  std::unique_ptr<Trainer> trainer =
      job ? job->trainer(c, std::move(model), std::move(source))
          : std::make_unique<Trainer>(c, std::move(model), std::move(source));
  runtime::Pipeline& pipeline = trainer->pipeline();
  out.placement = pipeline.placement_table();
  const auto started = std::chrono::steady_clock::now();
  runtime::Prediction p = pipeline.predict(pipeline.needs_input() ? x : torch::Tensor(), 1);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (size_t d = 0; d < p.stats.peak_bytes.size(); ++d)
    if (p.stats.peak_bytes[d])
      out.peak_bytes.emplace_back(pipeline.devices()[d].name, p.stats.peak_bytes[d]);
  if (!p.output.defined()) return out;
  torch::Tensor y = pipeline.model().prediction ? pipeline.model().prediction(p.output) : p.output;
  TANDEM_CHECK(y.dim() == 5 && y.size(2) == g.padded[0] && y.size(3) == g.padded[1] &&
                   y.size(4) == g.padded[2],
               "{}'s output has shape [{}]; predicting a scan needs an output of [1,K,{},{},{}], "
               "one value per voxel of its input",
               c.model, fmt::join(y.sizes(), ","), g.padded[0], g.padded[1], g.padded[2]);
  out.output = y[0].narrow(1, 0, g.scan[0])
                   .narrow(2, 0, g.scan[1])
                   .narrow(3, 0, g.scan[2])
                   .to(torch::kFloat32)
                   .contiguous();
  return out;
}

}  // namespace tandem::train
