#include "data/moments.h"

#include <ATen/Dispatch.h>

#include <array>
#include <cmath>

#include "tandem/common/check.h"

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

Moments moments_of_bytes(const torch::Tensor& bytes, const torch::Tensor& value_of) {
  TANDEM_CHECK(bytes.scalar_type() == torch::kUInt8, "moments_of_bytes needs uint8, not {}",
               c10::toString(bytes.scalar_type()));
  TANDEM_CHECK(value_of.numel() == 256, "moments_of_bytes needs 256 values, not {}",
               value_of.numel());
  std::array<double, 256> table{};
  int k = 0;
  for_each_value(value_of, [&](double v) { table[static_cast<size_t>(k++)] = v; });
  const torch::Tensor x = bytes.contiguous();
  const uint8_t* p = x.data_ptr<uint8_t>();
  const int64_t n = x.numel();
  Moments m;
  if (n == 0) return m;
  // moments()'s two passes, on the same doubles in the same order.
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += table[p[i]];
  m.mean = sum / static_cast<double>(n);
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = table[p[i]] - m.mean;
    squares += d * d;
  }
  m.stddev = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : 0.0;
  return m;
}

Moments moments(const torch::Tensor& values) { return moments(std::vector<torch::Tensor>{values}); }

}  // namespace tandem::data
