#include "tandem/data/mri.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "data/moments.h"
#include "data/rng.h"
#include "tandem/common/check.h"
#include "tandem/data/nifti.h"

namespace tandem::data {
namespace {
constexpr uint64_t kMriTrainStream = 0x4d524954ULL;    // "MRIT"
constexpr uint64_t kMriHeldOutStream = 0x4d524948ULL;  // "MRIH"
// Draws per crop to find a center voxel inside the brain; after that the last draw is kept.
constexpr int kPlacementAttempts = 32;

// First and last index along `axis` where the 0/1 volume `mask` is nonzero.
std::array<int64_t, 2> extent(const torch::Tensor& mask, int64_t axis) {
  std::vector<int64_t> others;
  for (int64_t d = 0; d < 3; ++d)
    if (d != axis) others.push_back(d);
  torch::Tensor any = mask.sum(others).gt(0).nonzero();
  return {any.min().item<int64_t>(), any.max().item<int64_t>()};
}

// Inclusive origin range for crops of side `s` inside voxels [begin, end) whose center
// should lie in [brain_lo, brain_hi]; requires end - begin >= s.
std::array<int64_t, 2> origin_range(int64_t begin, int64_t end, int64_t s,
                                    std::array<int64_t, 2> brain) {
  const int64_t lo = begin, hi = end - s;
  return {std::clamp(brain[0] - s / 2, lo, hi), std::clamp(brain[1] - s / 2, lo, hi)};
}

}  // namespace

int64_t MriDataset::check_fits(const std::array<int64_t, 3>& shape, int crop,
                               const MriOptions& options, const std::string& image_path) {
  TANDEM_CHECK(crop >= 1 && crop <= shape[0] && crop <= shape[1] && crop <= shape[2],
               "MriDataset: crop {} does not fit the volume of shape [{}] [Z,Y,X] from '{}'; use "
               "a crop in 1..{}.",
               crop, fmt::join(shape, ", "), image_path, std::min({shape[0], shape[1], shape[2]}));
  TANDEM_CHECK(options.held_out_fraction >= 0.0 && options.held_out_fraction <= 0.9,
               "MriDataset: held_out_fraction {} is outside 0..0.9.", options.held_out_fraction);
  const int64_t x = shape[2];
  const int64_t held_out_begin =
      x - std::llround(options.held_out_fraction * static_cast<double>(x));
  TANDEM_CHECK(held_out_begin >= crop,
               "MriDataset: crop {} does not fit the training slab x in [0, {}) of '{}' ({} "
               "columns); use a crop <= {} or a smaller held_out_fraction than {}.",
               crop, held_out_begin, image_path, held_out_begin, held_out_begin,
               options.held_out_fraction);
  TANDEM_CHECK(held_out_begin == x || x - held_out_begin >= crop,
               "MriDataset: crop {} does not fit the held-out slab x in [{}, {}) of '{}' ({} "
               "columns); use a crop <= {} or a larger held_out_fraction than {}.",
               crop, held_out_begin, x, image_path, x - held_out_begin, x - held_out_begin,
               options.held_out_fraction);
  return held_out_begin;
}

MriDataset::MriDataset(const std::string& image_path, const std::string& mask_path, int crop,
                       uint64_t seed, MriOptions options)
    : crop_(crop), seed_(seed), options_(options) {
  Volume image = read_nifti(image_path);
  Volume mask = read_nifti(mask_path);
  TANDEM_CHECK(image.data.size(0) == 1 && mask.data.size(0) == 1,
               "MriDataset: image '{}' [C,Z,Y,X] {} and mask '{}' {} must each hold one 3D "
               "volume (C = 1).",
               image_path, image.data.sizes(), mask_path, mask.data.sizes());
  image.data = image.data[0];
  mask.data = mask.data[0];
  TANDEM_CHECK(image.data.sizes() == mask.data.sizes(),
               "MriDataset: image '{}' has shape {} but mask '{}' has shape {}; they must match.",
               image_path, image.data.sizes(), mask_path, mask.data.sizes());
  const auto sizes = image.data.sizes();
  held_out_begin_ = check_fits({sizes[0], sizes[1], sizes[2]}, crop, options, image_path);

  mask_ = mask.data.gt(0).to(torch::kFloat32);
  TANDEM_CHECK(mask_.sum().item<double>() > 0,
               "MriDataset: mask '{}' has no voxel > 0; it cannot mark the brain.", mask_path);
  image_ = options.standardize ? head_standardized(image.data.unsqueeze(0), image_path)[0]
                               : image.data.to(torch::kFloat32);

  for (int64_t d = 0; d < 3; ++d) {
    const std::array<int64_t, 2> brain = extent(mask_, d);
    const bool is_x = d == 2;
    train_range_[d] = origin_range(0, is_x ? held_out_begin_ : sizes[d], crop, brain);
    held_out_range_[d] = origin_range(is_x ? held_out_begin_ : 0, sizes[d], crop, brain);
  }
}

MriDataset::Placement MriDataset::placement(int64_t index, Subset subset) const {
  TANDEM_CHECK(index >= 0, "MriDataset: crop index {} must be >= 0.", index);
  const bool train = subset == Subset::kTrain;
  TANDEM_CHECK(train || held_out_begin_ < image_.size(2),
               "MriDataset: there is no held-out set (held_out_fraction is 0); set "
               "MriOptions::held_out_fraction to sample one.");
  const auto& range = train ? train_range_ : held_out_range_;
  SampleRng rng(stream_seed(seed_, train ? kMriTrainStream : kMriHeldOutStream, uint64_t(index)));
  Placement p{};
  const int64_t half = crop_ / 2;
  const auto mask = mask_.accessor<float, 3>();
  for (int attempt = 0; attempt < kPlacementAttempts; ++attempt) {
    for (int d = 0; d < 3; ++d) p.origin[d] = rng.between(range[d][0], range[d][1]);
    if (mask[p.origin[0] + half][p.origin[1] + half][p.origin[2] + half] > 0) break;
  }
  for (int d = 0; d < 3; ++d) p.flipped[d] = train && options_.flips && rng.coin();
  return p;
}

VolumeBatch MriDataset::sample(int64_t first_index, int batch, Subset subset) const {
  TANDEM_CHECK(first_index >= 0 && batch >= 1,
               "MriDataset::sample: first_index {} must be >= 0 and batch {} >= 1.", first_index,
               batch);
  const int64_t s = crop_;
  VolumeBatch out;
  out.input = torch::empty({batch, 1, s, s, s}, torch::kFloat32);
  out.target = torch::empty({batch, 1, s, s, s}, torch::kFloat32);
  for (int b = 0; b < batch; ++b) {
    const Placement p = placement(first_index + b, subset);
    std::vector<int64_t> flip_dims;
    for (int64_t d = 0; d < 3; ++d)
      if (p.flipped[d]) flip_dims.push_back(d);
    auto cut = [&](const torch::Tensor& v) {
      torch::Tensor c = v.slice(0, p.origin[0], p.origin[0] + s)
                            .slice(1, p.origin[1], p.origin[1] + s)
                            .slice(2, p.origin[2], p.origin[2] + s);
      return flip_dims.empty() ? c : c.flip(flip_dims);
    };
    out.input[b][0].copy_(cut(image_));
    out.target[b][0].copy_(cut(mask_));
  }
  return out;
}

torch::Tensor head_standardized(const torch::Tensor& image, const std::string& path) {
  std::vector<torch::Tensor> channels;
  for (int64_t c = 0; c < image.size(0); ++c) {
    const torch::Tensor x = image[c];
    torch::Tensor head = x.masked_select(x.gt(0)).to(torch::kFloat64);
    TANDEM_CHECK(head.numel() >= 2, "{}: channel {} has {} voxels > 0; it is empty.", path, c,
                 head.numel());
    const Moments m = moments(head);
    TANDEM_CHECK(m.stddev > 0, "{}: channel {} is constant over its head ({}).", path, c, m.mean);
    channels.push_back(((x.to(torch::kFloat64) - m.mean) / m.stddev).to(torch::kFloat32));
  }
  return torch::stack(channels);
}

}  // namespace tandem::data
