#include "tandem/spatial/forward_chunks.h"

#include <torch/torch.h>

#include <algorithm>

#include "tandem/common/check.h"
#include "tandem/graph/call_context.h"

namespace tandem::spatial {
namespace {

// The output of `count` planes of depth `depth` in total, shaped as `piece` but for its depth.
torch::Tensor output_like(const torch::Tensor& piece, int64_t depth) {
  std::vector<int64_t> shape = piece.sizes().vec();
  shape[kDepthDim] = depth;
  return torch::empty(shape, piece.options());
}
}  // namespace

std::vector<std::pair<int64_t, int64_t>> forward_chunks(int64_t depth) {
  const int64_t size = std::max<int64_t>(1, (depth + 7) / 8);
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t first = 0; first < depth; first += size)
    chunks.emplace_back(first, std::min(size, depth - first));
  return chunks;
}

bool chunks_forward(int64_t bytes, bool local) {
  return !torch::GradMode::is_enabled() && (local || !graph::current_call().group) &&
         bytes >= kForwardChunkBytes;
}

torch::Tensor conv_in_chunks(const std::vector<torch::Tensor>& parts, int64_t padding,
                             const std::function<torch::Tensor(torch::Tensor)>& conv) {
  TANDEM_ASSERT(!parts.empty() && padding >= 0, "a chunked convolution of {} parts, padding {}",
                parts.size(), padding);
  const int64_t depth = parts.front().size(kDepthDim);
  torch::Tensor out;
  for (const auto& [first, count] : forward_chunks(depth)) {
    const int64_t low = std::max<int64_t>(0, first - padding);
    const int64_t high = std::min(depth, first + count + padding);
    std::vector<torch::Tensor> planes;
    for (const torch::Tensor& p : parts) planes.push_back(p.narrow(kDepthDim, low, high - low));
    torch::Tensor x = planes.size() == 1 ? planes.front() : torch::cat(planes, 1);
    const int64_t before = padding - (first - low);
    const int64_t after = padding - (high - first - count);
    if (before > 0 || after > 0) {
      std::vector<int64_t> pad(static_cast<size_t>(2 * (x.dim() - 2)), 0);
      pad[pad.size() - 2] = before;  // constant_pad_nd lists the last dimension first
      pad[pad.size() - 1] = after;
      x = torch::constant_pad_nd(x, pad);
    }
    const torch::Tensor y = conv(std::move(x));
    TANDEM_ASSERT(y.size(kDepthDim) == count, "a chunk of {} planes gave {}", count,
                  y.size(kDepthDim));
    if (!out.defined()) out = output_like(y, depth);
    out.narrow(kDepthDim, first, count).copy_(y);
  }
  return out;
}

torch::Tensor local_in_chunks(const torch::Tensor& x, int64_t factor,
                              const std::function<torch::Tensor(const torch::Tensor&)>& layer) {
  torch::Tensor out;
  for (const auto& [first, count] : forward_chunks(x.size(kDepthDim))) {
    const torch::Tensor y = layer(x.narrow(kDepthDim, first, count));
    TANDEM_ASSERT(y.size(kDepthDim) == factor * count, "a chunk of {} planes gave {}, not {}",
                  count, y.size(kDepthDim), factor * count);
    if (!out.defined()) out = output_like(y, factor * x.size(kDepthDim));
    out.narrow(kDepthDim, factor * first, factor * count).copy_(y);
  }
  return out;
}

}  // namespace tandem::spatial
