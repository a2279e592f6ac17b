#include "data/moments.h"

#include <ATen/Dispatch.h>

#include <cmath>

namespace tandem::data {

Moments moments(const torch::Tensor& values) {
  const torch::Tensor x = values.contiguous();
  const int64_t n = x.numel();
  Moments m;
  if (n == 0) return m;
  AT_DISPATCH_ALL_TYPES(x.scalar_type(), "moments", [&] {
    const scalar_t* p = x.data_ptr<scalar_t>();
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(p[i]);
    m.mean = sum / static_cast<double>(n);
    double squares = 0;  // about the mean: no cancellation
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(p[i]) - m.mean;
      squares += d * d;
    }
    m.stddev = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : 0.0;
  });
  return m;
}

}  // namespace tandem::data
