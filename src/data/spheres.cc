#include "tandem/data/spheres.h"

#include <algorithm>
#include <cmath>

#include "data/rng.h"
#include "tandem/common/check.h"

namespace tandem::data {
namespace {
constexpr uint64_t kSpheresStream = 0x53504845ULL;  // "SPHE"

// Fills one [S,S,S] input and target from its own generator.
void draw_volume(int s, const SpheresOptions& o, SampleRng& rng, float* input, float* target) {
  const int64_t n = int64_t{s} * s * s;
  std::fill(input, input + n, 0.0f);
  std::fill(target, target + n, 0.0f);
  const int64_t objects = rng.between(o.min_objects, o.max_objects);
  for (int64_t k = 0; k < objects; ++k) {
    double center[3], radius[3];
    for (int d = 0; d < 3; ++d) {
      radius[d] = std::max(1.0, rng.uniform(o.min_radius, o.max_radius) * s);
      center[d] = rng.uniform(0.0, s - 1.0);
    }
    const auto value = static_cast<float>(rng.uniform(o.min_intensity, o.max_intensity));
    // Only the ellipsoid's bounding box can be inside it.
    int lo[3], hi[3];
    for (int d = 0; d < 3; ++d) {
      lo[d] = std::max(0, static_cast<int>(std::floor(center[d] - radius[d])));
      hi[d] = std::min(s - 1, static_cast<int>(std::ceil(center[d] + radius[d])));
    }
    for (int z = lo[0]; z <= hi[0]; ++z) {
      const double dz = (z - center[0]) / radius[0];
      for (int y = lo[1]; y <= hi[1]; ++y) {
        const double dy = (y - center[1]) / radius[1];
        for (int x = lo[2]; x <= hi[2]; ++x) {
          const double dx = (x - center[2]) / radius[2];
          if (dz * dz + dy * dy + dx * dx > 1.0) continue;
          const int64_t i = (int64_t{z} * s + y) * s + x;
          input[i] = std::max(input[i], value);
          target[i] = 1.0f;
        }
      }
    }
  }
  if (o.noise_std > 0.0)
    for (int64_t i = 0; i < n; ++i) input[i] += static_cast<float>(o.noise_std * rng.normal());
}

}  // namespace

SpheresDataset::SpheresDataset(int size, uint64_t seed, SpheresOptions options)
    : size_(size), seed_(seed), options_(options) {
  const SpheresOptions& o = options_;
  TANDEM_CHECK(size >= 4 && size <= 1024, "SpheresDataset: size {} is outside 4..1024.", size);
  TANDEM_CHECK(1 <= o.min_objects && o.min_objects <= o.max_objects,
               "SpheresDataset: objects per volume {}..{} must satisfy 1 <= min <= max.",
               o.min_objects, o.max_objects);
  TANDEM_CHECK(0.0 < o.min_radius && o.min_radius <= o.max_radius && o.max_radius <= 1.0,
               "SpheresDataset: radius fractions {}..{} must satisfy 0 < min <= max <= 1.",
               o.min_radius, o.max_radius);
  TANDEM_CHECK(o.min_intensity <= o.max_intensity && o.noise_std >= 0.0,
               "SpheresDataset: intensities {}..{} need min <= max, and noise_std {} must be >= 0.",
               o.min_intensity, o.max_intensity, o.noise_std);
}

VolumeBatch SpheresDataset::sample(int64_t first_index, int batch) const {
  TANDEM_CHECK(first_index >= 0 && batch >= 1,
               "SpheresDataset::sample: first_index {} must be >= 0 and batch {} >= 1.",
               first_index, batch);
  const int64_t s = size_;
  VolumeBatch out;
  out.input = torch::empty({batch, 1, s, s, s}, torch::kFloat32);
  out.target = torch::empty({batch, 1, s, s, s}, torch::kFloat32);
  for (int b = 0; b < batch; ++b) {
    SampleRng rng(stream_seed(seed_, kSpheresStream, static_cast<uint64_t>(first_index + b)));
    draw_volume(size_, options_, rng, out.input[b].data_ptr<float>(),
                out.target[b].data_ptr<float>());
  }
  return out;
}

}  // namespace tandem::data
