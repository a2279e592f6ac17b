// predict_volume: a whole scan through the pipeline equals the model's forward of the same
// padded scan on one device, and every placement (slabs, uneven slabs, stages, both) gives the
// one device's output within float rounding.
#include "tandem/train/predict.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tandem/data/nifti_folder.h"
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
  const torch::Tensor want = direct_forward(model, x)[0].narrow(1, 0, 13).narrow(2, 0, 18).narrow(
      3, 0, 11);
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
