#include "tandem/data/regression.h"

#include <cmath>

#include "data/rng.h"
#include "tandem/common/check.h"

namespace tandem::data {
namespace {
constexpr uint64_t kRegressionStream = 0x52454752ULL;  // "REGR"

torch::Tensor box_mean(const torch::Tensor& x) {
  return torch::avg_pool3d(x, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, /*ceil_mode=*/false,
                           /*count_include_pad=*/false);
}
}  // namespace

VolumeBatch synthetic_regression(int64_t first_index, int batch, int channels, int size,
                                 uint64_t seed) {
  // LibTorch's box mean (avg_pool3d) takes no volume smaller than its 3x3x3 box, padding aside.
  TANDEM_CHECK(first_index >= 0 && batch >= 1 && channels >= 1 && size >= kMinRegressionSize,
               "synthetic_regression: need first_index >= 0, batch >= 1, channels >= 1 and size "
               ">= {}; got first_index {}, batch {}, channels {}, size {}.",
               kMinRegressionSize, first_index, batch, channels, size);
  const int64_t s = size;
  const int64_t per_sample = channels * s * s * s;
  torch::NoGradGuard no_grad;
  torch::Tensor input = torch::empty({batch, channels, s, s, s}, torch::kFloat32);
  float* p = input.data_ptr<float>();
  for (int b = 0; b < batch; ++b) {
    SampleRng rng(stream_seed(seed, kRegressionStream, static_cast<uint64_t>(first_index + b)));
    for (int64_t i = 0; i < per_sample; ++i)
      p[b * per_sample + i] = static_cast<float>(rng.normal());
  }
  std::vector<float> w(channels);
  for (int c = 0; c < channels; ++c)
    w[c] = (c % 2 == 0 ? 1.0f : -1.0f) / std::sqrt(float(channels));
  torch::Tensor weights = torch::tensor(w).view({1, channels, 1, 1, 1});
  torch::Tensor field = (input * weights).sum(1, /*keepdim=*/true);
  const double gain = std::pow(81.0 / 19.0, 1.5);
  return {input, torch::tanh(box_mean(box_mean(field)) * gain)};
}

}  // namespace tandem::data
