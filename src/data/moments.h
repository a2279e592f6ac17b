// The mean and standard deviation that data sets are standardized with, summed in one fixed
// order: LibTorch's reductions split their sums among the calling thread's threads, so the last
// bits of their mean would follow the thread count, and every step of a run after them.
#pragma once

#include <torch/types.h>

#include <vector>

namespace tandem::data {

struct Moments {
  double mean = 0;
  double stddev = 0;  // with Bessel's correction (n - 1); 0 for fewer than 2 values
};

// Over every element of `values` (any real dtype), in double, element by element in order.
Moments moments(const torch::Tensor& values);
// Over every element of all of `parts`, in order (part after part): moments(torch::cat of their
// flattened elements) without the copy.
Moments moments(const std::vector<torch::Tensor>& parts);

// moments() of value_of[b] for every byte b of `bytes` (uint8), in order: the moments of a data
// set kept as bytes, bit for bit those of its values, without making them. `value_of`: the 256
// values of the bytes (any real dtype).
Moments moments_of_bytes(const torch::Tensor& bytes, const torch::Tensor& value_of);

}  // namespace tandem::data
