#include "data/moments.h"

#include <ATen/Dispatch.h>

#include <cmath>

namespace tandem::data {

namespace {

// Calls f(value) for every element of `part` in order, as a double.
template <typename F>
void for_each_value(const torch::Tensor& part, F&& f) {
  const torch::Tensor x = part.contiguous();
  const int64_t n = x.numel();
  AT_DISPATCH_ALL_TYPES(x.scalar_type(), "moments", [&] {
    const scalar_t* p = x.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) f(static_cast<double>(p[i]));
  });
}

}  // namespace

Moments moments(const std::vector<torch::Tensor>& parts) {
  int64_t n = 0;
  for (const torch::Tensor& part : parts) n += part.numel();
  Moments m;
  if (n == 0) return m;
  double sum = 0;
  for (const torch::Tensor& part : parts) for_each_value(part, [&](double v) { sum += v; });
  m.mean = sum / static_cast<double>(n);
  double squares = 0;  // about the mean: no cancellation
  for (const torch::Tensor& part : parts)
    for_each_value(part, [&](double v) {
      const double d = v - m.mean;
      squares += d * d;
    });
  m.stddev = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : 0.0;
  return m;
}

Moments moments(const torch::Tensor& values) { return moments(std::vector<torch::Tensor>{values}); }

}  // namespace tandem::data
