// predict_volume: a whole scan through the pipeline equals the model's forward of the same
// padded scan on one device, and every placement (slabs, uneven slabs, stages, both) gives the
// one device's output within float rounding.
#include "tandem/train/predict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "tandem/data/nifti_folder.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/train/catalog.h"

namespace tandem::train {
namespace {

Config unet() {
  Config c;
  c.model = "unet3d";
  c.levels = 3;  // pools twice: sides are padded to multiples of 4
  c.filters = 4;
  c.dropout = 0;
  c.seed = 7;
  c.devices = "1";
  return c;
}

// A scan of an odd grid: [1, 13, 18, 11].
torch::Tensor scan() {
  torch::manual_seed(11);
  return torch::randn({1, 13, 18, 11}, torch::kFloat64) * 30 + 200;
}

// The model's output, run layer by layer on one device.
torch::Tensor direct_forward(const graph::Model& m, const torch::Tensor& input) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> env{{m.input, input}};
  for (const auto& l : m.layers) {
    graph::Tensors in;
    for (const auto& n : l.inputs) in.push_back(env.at(n));
    graph::Tensors out = l.forward(in);
    for (size_t k = 0; k < out.size(); ++k) env[l.outputs[k]] = out[k];
  }
  return env.at(m.output);
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

TEST(VolumeGrid, PadsEveryAxisToThePoolingMultiple) {
  const VolumeGrid g = volume_grid(unet(), {1, 13, 18, 11});
  EXPECT_EQ(g.multiple, 4);
  EXPECT_EQ(g.scan, (std::array<int64_t, 3>{13, 18, 11}));
  EXPECT_EQ(g.padded, (std::array<int64_t, 3>{16, 20, 12}));
}

TEST(PredictVolume, OneDeviceEqualsTheModelsForwardOfThePaddedScan) {
  const Config c = unet();
  const VolumePrediction p = predict_volume(nullptr, c, scan());
  ASSERT_TRUE(p.output.defined());
  EXPECT_EQ(p.output.sizes(), (std::vector<int64_t>{1, 13, 18, 11}));
  torch::manual_seed(c.seed);
  const graph::Model model = make_model(c, {1, 16, 20, 12});
  torch::Tensor x = data::standardized(scan());
  x = torch::constant_pad_nd(x, {0, 1, 0, 2, 0, 3}).unsqueeze(0);
  const torch::Tensor want =
      direct_forward(model, x)[0].narrow(1, 0, 13).narrow(2, 0, 18).narrow(3, 0, 11);
  // The same layers on the same tensor on one device: the same bits.
  EXPECT_TRUE(torch::equal(p.output, want)) << relative_difference(p.output, want);
  ASSERT_FALSE(p.peak_bytes.empty());
  EXPECT_EQ(p.peak_bytes.front().first, "cpu:0");
}

struct Layout {
  const char* name;
  const char* devices;
  int spatial;
  int stages;
};

class PredictLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(PredictLayouts, EqualOneDevice) {
  const Layout& l = GetParam();
  const torch::Tensor one = predict_volume(nullptr, unet(), scan()).output;
  Config c = unet();
  c.devices = l.devices;
  c.spatial = l.spatial;
  c.stages = l.stages;
  const VolumePrediction p = predict_volume(nullptr, c, scan());
  ASSERT_TRUE(p.output.defined());
  EXPECT_EQ(p.output.sizes(), one.sizes());
  EXPECT_LE(relative_difference(p.output, one), 1e-5) << l.name;
  // Every device ran its part.
  EXPECT_EQ(p.peak_bytes.size(), static_cast<size_t>(std::stoi(l.devices))) << l.name;
}

INSTANTIATE_TEST_SUITE_P(
    Placements, PredictLayouts,
    ::testing::Values(Layout{"slabs2", "2", 2, 0}, Layout{"slabs3_uneven", "3", 3, 0},
                      Layout{"stages2", "2", 1, 2}, Layout{"stages2_slabs2", "4", 2, 2}),
    [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

TEST(WindowStarts, CoverTheAxisAndEndOnItsLastPlane) {
  EXPECT_EQ(window_starts(20, 8, 0.25), (std::vector<int64_t>{0, 6, 12}));
  EXPECT_EQ(window_starts(13, 8, 0.25), (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(window_starts(13, 8, 0.5), (std::vector<int64_t>{0, 4, 5}));
  EXPECT_EQ(window_starts(16, 8, 0.0), (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(window_starts(10, 10, 0.7), (std::vector<int64_t>{0}));
  EXPECT_EQ(window_starts(12, 10, 0.7), (std::vector<int64_t>{0, 2}));      // step 3, not 2.999...
  EXPECT_EQ(window_starts(5, 2, 0.9), (std::vector<int64_t>{0, 1, 2, 3}));  // step at least 1
  EXPECT_THROW(window_starts(7, 8, 0.25), Error);
  EXPECT_THROW(window_starts(16, 8, 1.0), Error);
}

TEST(WindowWeights, GaussianPeaksAtTheCentreAndIsSymmetric) {
  const torch::Tensor w = window_weights({5, 4, 8}, Blend::kGaussian);
  EXPECT_EQ(w.sizes(), (std::vector<int64_t>{5, 4, 8}));
  EXPECT_EQ(w.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(w, w.flip({0, 1, 2})));
  // Sigma 5/8 along D: one plane from the centre weighs exp(-1 / (2 (5/8)^2)) of it.
  EXPECT_NEAR((w[1][1][3] / w[2][1][3]).item<double>(), std::exp(-1.0 / (2 * 0.625 * 0.625)), 1e-6);
  EXPECT_EQ(w.argmax().item<int64_t>(), (2 * 4 + 1) * 8 + 3);
  EXPECT_GT(w.min().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(window_weights({3, 2, 2}, Blend::kConstant), torch::ones({3, 2, 2})));
}

// A scan of the model's multiple on every axis: nothing is padded.
torch::Tensor even_scan() {
  torch::manual_seed(12);
  return torch::randn({1, 16, 20, 12}, torch::kFloat64) * 30 + 200;
}

TEST(PredictWindows, OneWindowOfTheScanEqualsTheScanInOnePiece) {
  const torch::Tensor whole = predict_volume(nullptr, unet(), even_scan()).output;
  PredictOptions o;
  o.window.size = {16, 20, 12};
  const VolumePrediction p = predict_volume(nullptr, unet(), even_scan(), o);
  EXPECT_EQ(p.windows, 1);
  EXPECT_TRUE(torch::equal(p.output, whole));
}

TEST(PredictWindows, BatchesSlabsAndStagesGiveOneDevicesWindows) {
  PredictOptions o;
  o.window.size = {8, 8, 8};
  o.window.overlap = 0.5;
  int64_t forwards = 0;
  o.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(done, forwards + 1);
    forwards = done;
    EXPECT_EQ(total, 3 * 4 * 2);
  };
  const VolumePrediction one = predict_volume(nullptr, unet(), even_scan(), o);
  EXPECT_EQ(one.windows, 3 * 4 * 2);  // D: 0, 4, 8; H: 0, 4, 8, 12; W: 0, 4
  EXPECT_EQ(forwards, one.windows);
  EXPECT_EQ(one.output.sizes(), (std::vector<int64_t>{1, 16, 20, 12}));
  o.progress = nullptr;
  o.window.batch = 5;  // the last batch holds 4
  EXPECT_LE(relative_difference(predict_volume(nullptr, unet(), even_scan(), o).output, one.output),
            1e-5);
  Config c = unet();
  c.devices = "4";
  c.spatial = 2;
  c.stages = 2;
  const VolumePrediction split = predict_volume(nullptr, c, even_scan(), o);
  EXPECT_EQ(split.peak_bytes.size(), 4u);
  EXPECT_LE(relative_difference(split.output, one.output), 1e-5);
}

TEST(PredictWindows, MirroringAveragesTheFlippedScansPredictions) {
  PredictOptions o;
  o.mirror = {0, 2};
  const torch::Tensor mirrored = predict_volume(nullptr, unet(), even_scan(), o).output;
  torch::Tensor want = torch::zeros_like(mirrored);
  for (const std::vector<int64_t>& dims :
       {std::vector<int64_t>{}, {1}, {3}, std::vector<int64_t>{1, 3}}) {
    const torch::Tensor x = dims.empty() ? even_scan() : even_scan().flip(dims);
    const torch::Tensor y = predict_volume(nullptr, unet(), x).output;
    want += dims.empty() ? y : y.flip(dims);
  }
  EXPECT_LE(relative_difference(mirrored, want / 4), 1e-6);
}

TEST(PredictWindows, RefusesWindowsTheScanOrTheModelCannotTake) {
  auto message = [](std::array<int64_t, 3> window) {
    PredictOptions o;
    o.window.size = window;
    try {
      plan_prediction(unet(), {1, 13, 18, 11}, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({16, 8, 8}).find("larger than the scan 13x18x11 along D"), std::string::npos)
      << message({16, 8, 8});
  EXPECT_NE(message({8, 6, 8}).find("6 is not a multiple of 4"), std::string::npos)
      << message({8, 6, 8});
}

// The forward's plan bounds what every layout's devices hold, within 10%.
class ForwardPlans : public ::testing::TestWithParam<Layout> {};

TEST_P(ForwardPlans, BoundTheMeasuredPeak) {
  const Layout& l = GetParam();
  Config c = unet();
  c.devices = l.devices;
  c.spatial = l.spatial;
  c.stages = l.stages;
  c.device_memory = uint64_t{1} << 40;
  const VolumePrediction p = predict_volume(nullptr, c, even_scan());
  uint64_t measured = 0;
  for (const auto& [name, bytes] : p.peak_bytes) measured = std::max(measured, bytes);
  EXPECT_GE(p.planned_bytes, static_cast<double>(measured)) << l.name;
  EXPECT_LE(p.planned_bytes, 1.1 * static_cast<double>(measured)) << l.name;
}

INSTANTIATE_TEST_SUITE_P(Placements, ForwardPlans,
                         ::testing::Values(Layout{"one", "1", 1, 0}, Layout{"slabs2", "2", 2, 0},
                                           Layout{"slabs3_uneven", "3", 3, 0},
                                           Layout{"stages2", "2", 1, 2},
                                           Layout{"stages2_slabs2", "4", 2, 2}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::string(info.param.name);
                         });

TEST(ForwardPlans, OverTheBudgetRefusesBeforeWorkNamingSlabsAndWindowsThatFit) {
  Config c = unet();
  c.device_memory = uint64_t{1} << 40;
  const double whole = predict_volume(nullptr, c, even_scan()).planned_bytes;
  c.device_memory = static_cast<uint64_t>(whole * 0.7);
  try {
    predict_volume(nullptr, c, even_scan());
    FAIL() << "a forward over its budget ran";
  } catch (const memory::DoesNotFit& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the scan in one piece (16x20x12)"), std::string::npos) << what;
    EXPECT_NE(what.find("Config::spatial = 2 would plan"), std::string::npos) << what;
    EXPECT_NE(what.find("windows of 12x12x12 would plan"), std::string::npos) << what;
  }
  // The windows it names fit.
  PredictOptions o;
  o.window.size = {12, 12, 12};
  const VolumePrediction windows = predict_volume(nullptr, c, even_scan(), o);
  EXPECT_LE(windows.planned_bytes, static_cast<double>(c.device_memory));
  // And so does --window auto, by the same windows.
  o.window.size = {};
  o.window.automatic = true;
  const VolumePrediction automatic = predict_volume(nullptr, c, even_scan(), o);
  EXPECT_EQ(automatic.window, (std::array<int64_t, 3>{12, 12, 12}));
  EXPECT_NE(automatic.note.find("by windows of 12x12x12"), std::string::npos) << automatic.note;
  EXPECT_TRUE(torch::equal(automatic.output, windows.output));
  for (const auto& [name, bytes] : automatic.peak_bytes) EXPECT_LE(bytes, c.device_memory);
}

TEST(LabelDice, MaskAtTheThresholdAndTheMeanOverClasses) {
  // One output: voxels >= 0.5 against label > 0: 2 x 2 / (3 + 3).
  const torch::Tensor p = torch::tensor({0.9, 0.6, 0.5, 0.1, 0.2, 0.0}).view({1, 1, 2, 3});
  const torch::Tensor label = torch::tensor({1, 0, 1, 1, 0, 0}).view({1, 2, 3});
  EXPECT_DOUBLE_EQ(label_dice(p, label), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(label_dice(p, label, 0.55), 2.0 / 5.0);
  // Three classes: the argmax is 0, 1, 2, 2; class 1: 2 x 1 / (1 + 2), class 2: 2 x 1 / (2 + 1).
  const torch::Tensor q =
      torch::tensor({0.8, 0.1, 0.1, 0.1, 0.7, 0.2, 0.2, 0.2, 0.6, 0.3, 0.3, 0.4})
          .view({4, 3})
          .t()
          .reshape({3, 1, 1, 4});
  const torch::Tensor classes = torch::tensor({0, 1, 1, 2}).view({1, 1, 4});
  EXPECT_DOUBLE_EQ(label_dice(q, classes), (2.0 / 3.0 + 2.0 / 3.0) / 2);
  // Empty in both: 1.
  EXPECT_DOUBLE_EQ(label_dice(torch::zeros({1, 1, 1, 2}), torch::zeros({1, 1, 2})), 1.0);
  EXPECT_THROW(label_dice(p, torch::zeros({1, 3, 2})), Error);
}

TEST(PredictImages, EqualTheMlpsSoftmaxOnEveryPlacementAndBatch) {
  Config c;
  c.model = "mlp";
  c.width = 16;
  c.blocks = 2;
  c.dropout = 0;
  c.seed = 3;
  c.devices = "1";
  EXPECT_FALSE(predicts_volumes(c));
  EXPECT_TRUE(predicts_volumes(unet()));
  torch::manual_seed(4);
  const torch::Tensor images = torch::rand({10, 28, 28});
  const ImagesPrediction one = predict_images(nullptr, c, images, 10);
  ASSERT_TRUE(one.output.defined());
  EXPECT_EQ(one.output.sizes(), (std::vector<int64_t>{10, 10}));
  torch::manual_seed(c.seed);
  const graph::Model model = make_model(c, {28, 28});
  const double mean = images.to(torch::kFloat64).mean().item<double>();
  const double sd = images.to(torch::kFloat64).std().item<double>();
  const torch::Tensor x = ((images.to(torch::kFloat64) - mean) / sd).to(torch::kFloat32);
  const torch::Tensor want = torch::softmax(direct_forward(model, graph::fit_input(model, x)), 1);
  EXPECT_LE(relative_difference(one.output, want), 1e-5);
  c.devices = "2";
  c.stages = 2;
  const ImagesPrediction split = predict_images(nullptr, c, images, 3);  // 3, 3, 3 and 1
  EXPECT_LE(relative_difference(split.output, one.output), 1e-6);
  EXPECT_THROW(predict_images(nullptr, c, images, 3, {data::Normalize::kPerImage, true}), Error);
}

TEST(PredictVolume, RefusesAModelWithoutVolumes) {
  Config c;
  c.model = "mlp";
  c.devices = "1";
  try {
    predict_volume(nullptr, c, scan());
    FAIL() << "the mlp predicted a scan";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::train
