#include "data/batching.h"

#include <numeric>
#include <utility>

#include "data/rng.h"
#include "tandem/common/check.h"

namespace tandem::data {
namespace {
// Separates the shuffle stream from the other users of a seed.
constexpr uint64_t kShuffleStream = 0x5348554646ULL;  // "SHUFF"
}  // namespace

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, int64_t epoch) {
  TANDEM_CHECK(n >= 0, "shuffled_indices: n must be >= 0, got {}.", n);
  TANDEM_CHECK(epoch >= 0, "shuffled_indices: epoch must be >= 0, got {}.", epoch);
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), int64_t{0});
  SampleRng rng(stream_seed(seed, kShuffleStream, static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(idx[i], idx[j]);
  }
  return idx;
}

ImageBatch gather(const ImageDataset& dataset, const std::vector<int64_t>& idx, int64_t begin,
                  int64_t end) {
  const auto count = static_cast<int64_t>(idx.size());
  TANDEM_CHECK(0 <= begin && begin <= end && end <= count,
               "gather: range [{}, {}) is not inside the {} indices given.", begin, end, count);
  const int64_t n = dataset.size();
  for (int64_t i = begin; i < end; ++i)
    TANDEM_CHECK(0 <= idx[i] && idx[i] < n,
                 "gather: index {} (position {}) is outside the data set of {} examples.", idx[i],
                 i, n);
  torch::Tensor rows =
      torch::tensor(std::vector<int64_t>(idx.begin() + begin, idx.begin() + end), torch::kInt64);
  return {dataset.images.index_select(0, rows), dataset.labels.index_select(0, rows)};
}

}  // namespace tandem::data
