#include "tandem/data/regression.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tandem/common/check.h"

namespace tandem::data {
namespace {

TEST(Regression, ShapesAndRange) {
  VolumeBatch b = synthetic_regression(0, 2, 3, 10, 1);
  EXPECT_EQ(b.input.sizes(), (std::vector<int64_t>{2, 3, 10, 10, 10}));
  EXPECT_EQ(b.target.sizes(), (std::vector<int64_t>{2, 1, 10, 10, 10}));
  EXPECT_LT(b.target.abs().max().item<float>(), 1.0f);
}

TEST(Regression, DeterministicBySeedAndIndex) {
  VolumeBatch a = synthetic_regression(4, 3, 2, 8, 9);
  VolumeBatch b = synthetic_regression(4, 3, 2, 8, 9);
  EXPECT_TRUE(torch::equal(a.input, b.input));
  EXPECT_TRUE(torch::equal(a.target, b.target));
  EXPECT_TRUE(torch::equal(synthetic_regression(5, 1, 2, 8, 9).input[0], a.input[1]));
  EXPECT_FALSE(torch::equal(synthetic_regression(4, 3, 2, 8, 10).input, a.input));
}

TEST(Regression, InputIsStandardNormalAndTargetUsesTanhRange) {
  VolumeBatch b = synthetic_regression(0, 2, 2, 24, 3);
  torch::Tensor x = b.input.to(torch::kFloat64);
  EXPECT_NEAR(x.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(x.std().item<double>(), 1.0, 0.01);
  // The gain puts the interior pre-activation at unit spread: tanh of N(0,1) has std ~0.63.
  torch::Tensor interior =
      b.target.slice(2, 2, 22).slice(3, 2, 22).slice(4, 2, 22).to(torch::kFloat64);
  EXPECT_NEAR(interior.std().item<double>(), 0.63, 0.06);
}

TEST(Regression, TargetIsSmootherThanInput) {
  VolumeBatch b = synthetic_regression(0, 1, 1, 24, 3);
  auto roughness = [](const torch::Tensor& v) {
    torch::Tensor d = v.slice(4, 1) - v.slice(4, 0, -1);
    return (d.pow(2).mean() / v.var()).item<double>();
  };
  // White noise: neighbour differences have twice the variance. After the two box means the
  // lag-1 correlation along an axis is 16/19 (kernel 1,2,3,2,1), so the ratio is
  // 2 * (1 - 16/19) = 0.32 before tanh, which barely changes it.
  EXPECT_NEAR(roughness(b.input), 2.0, 0.1);
  EXPECT_NEAR(roughness(b.target), 2.0 * 3.0 / 19.0, 0.05);
}

TEST(Regression, TargetIsALocalFunctionOfTheInput) {
  // Changing one input voxel changes the target only within 2 voxels of it.
  VolumeBatch a = synthetic_regression(0, 1, 2, 12, 5);
  torch::Tensor input = a.input.clone();
  input[0][1][6][6][6] += 3.0f;
  torch::Tensor w = torch::tensor({1.0f, -1.0f}).view({1, 2, 1, 1, 1}) / std::sqrt(2.0f);
  auto target_of = [&](const torch::Tensor& in) {
    auto box = [](const torch::Tensor& t) {
      return torch::avg_pool3d(t, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, false, false);
    };
    return torch::tanh(box(box((in * w).sum(1, true))) * std::pow(81.0 / 19.0, 1.5));
  };
  EXPECT_TRUE(torch::allclose(target_of(a.input), a.target, 1e-5, 1e-6));
  torch::Tensor changed = (target_of(input) - a.target).abs().gt(1e-6).nonzero();
  ASSERT_GT(changed.size(0), 0);
  EXPECT_GE(changed.slice(1, 2).min().item<int64_t>(), 4);
  EXPECT_LE(changed.slice(1, 2).max().item<int64_t>(), 8);
}

TEST(Regression, BadArgumentsThrowWithValues) {
  try {
    synthetic_regression(0, 1, 0, 8, 1);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channels 0"), std::string::npos) << e.what();
  }
  // Smaller than the box mean's 3x3x3 box: refused with the sizes, not by LibTorch.
  try {
    synthetic_regression(0, 1, 1, 2, 1);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size >= 3; got first_index 0, batch 1, channels 1, "
                                         "size 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(synthetic_regression(0, 1, 1, 3, 1).target.sizes(),
            (std::vector<int64_t>{1, 1, 3, 3, 3}));
}

}  // namespace
}  // namespace tandem::data
