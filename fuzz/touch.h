// Reads every byte a tensor's view can reach, through memcpy in instrumented code, so that
// AddressSanitizer sees a tensor whose sizes, strides or offset reach past its storage
// (LibTorch's own kernels are not instrumented: a read past the storage there goes unseen).
#pragma once

#include <torch/types.h>

#include <cstring>
#include <vector>

namespace tandem::fuzz {

inline void touch(const torch::Tensor& t) {
  if (!t.defined() || t.numel() == 0 || !t.has_storage()) return;
  int64_t low = 0, high = 0;  // element offsets from data_ptr()
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    (reach < 0 ? low : high) += reach;
  }
  const int64_t item = static_cast<int64_t>(t.element_size());
  const char* first = static_cast<const char*>(t.data_ptr()) + low * item;
  std::vector<char> copy(static_cast<size_t>((high - low + 1) * item));
  std::memcpy(copy.data(), first, copy.size());
}

}  // namespace tandem::fuzz
