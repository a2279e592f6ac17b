#include "tandem/models/keyed_dropout.h"

#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>

#include <cmath>

#include "tandem/common/check.h"

namespace tandem::models {

namespace {

// Fills `n` mask values of sample `sample`, whose whole-sample element indices run from
// `element` on. One Philox call gives the numbers of 4 consecutive elements.
void fill_run(float* out, int64_t n, uint64_t key, int64_t sample, int64_t element,
              uint64_t threshold, float scale) {
  at::philox_engine gen(key, static_cast<uint64_t>(sample), static_cast<uint64_t>(element / 4));
  for (int64_t skip = element % 4; skip > 0; --skip) gen();
  for (int64_t j = 0; j < n; ++j) out[j] = gen() < threshold ? scale : 0.0f;
}

}  // namespace

torch::Tensor keyed_dropout_mask(uint64_t key, int64_t first_sample, c10::IntArrayRef sizes,
                                 double keep_probability, const graph::SampleWindow& window) {
  TANDEM_CHECK(keep_probability > 0 && keep_probability <= 1,
               "a dropout keep probability must be in (0, 1], not {}", keep_probability);
  TANDEM_CHECK(first_sample >= 0, "the first sample of a dropout mask is {}, not an index",
               first_sample);
  TANDEM_CHECK(!sizes.empty(), "a dropout mask needs a batch dimension; its sizes are empty");
  const int dims = static_cast<int>(sizes.size()) - 1;  // per-sample dimensions
  std::vector<int64_t> offsets(dims, 0), full(sizes.begin() + 1, sizes.end());
  if (!window.whole()) {
    TANDEM_CHECK(static_cast<int>(window.full_sizes.size()) == dims &&
                     window.offsets.size() == window.full_sizes.size(),
                 "a sample window of {} offsets and {} full sizes does not fit a tensor of sizes "
                 "[{}] ({} dimensions per sample)",
                 window.offsets.size(), window.full_sizes.size(), fmt::join(sizes, ", "), dims);
    for (int k = 0; k < dims; ++k) {
      TANDEM_CHECK(window.offsets[k] >= 0 && window.offsets[k] + sizes[k + 1] <= window.full_sizes[k],
                   "a window of {} from offset {} does not fit the sample's {} in dimension {}",
                   sizes[k + 1], window.offsets[k], window.full_sizes[k], k + 1);
    }
    offsets = window.offsets;
    full = window.full_sizes;
  }
  // Row-major strides of the whole sample.
  std::vector<int64_t> full_stride(dims, 1);
  for (int k = dims - 2; k >= 0; --k) full_stride[k] = full_stride[k + 1] * full[k + 1];

  torch::Tensor mask = torch::empty(sizes, torch::kFloat);
  const int64_t batch = sizes[0];
  const int64_t run = dims > 0 ? sizes.back() : 1;  // contiguous in the tensor and the sample
  const int64_t runs_per_sample = batch > 0 ? mask.numel() / batch / std::max<int64_t>(run, 1) : 0;
  if (mask.numel() == 0) return mask;
  // Kept when the 32-bit number is below keep * 2^32; keep 1 keeps every element.
  const uint64_t threshold =
      static_cast<uint64_t>(std::ldexp(keep_probability, 32));
  const float scale = static_cast<float>(1.0 / keep_probability);
  float* out = mask.data_ptr<float>();
  // Every element is a function of (key, sample, element) alone: any division among threads
  // gives the same mask.
  at::parallel_for(0, batch * runs_per_sample, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / runs_per_sample;
      int64_t rest = r % runs_per_sample;
      // The whole-sample index of this run's first element.
      int64_t element = dims > 0 ? offsets[dims - 1] : 0;
      for (int k = dims - 2; k >= 0; --k) {
        const int64_t i = rest % sizes[k + 1];
        rest /= sizes[k + 1];
        element += (offsets[k] + i) * full_stride[k];
      }
      fill_run(out + r * run, run, key, first_sample + b, element, threshold, scale);
    }
  });
  return mask;
}

}  // namespace tandem::models
