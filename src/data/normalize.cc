#include "data/normalize.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/moments.h"
#include "tandem/common/check.h"
#include "tandem/data/mri.h"
#include "tandem/data/nifti_folder.h"

namespace tandem::data {

std::string describe(const Normalization& n) {
  switch (n.mode) {
    case Normalize::kDefault:
      return "as the data set does by default";
    case Normalize::kNone:
      return "not standardized";
    case Normalize::kPerImage:
      return n.head ? "each image standardized per channel over its voxels > 0 (the head)"
                    : "each image standardized per channel over all its values";
    case Normalize::kDataset:
      if (n.mean.empty()) return "standardized with the training inputs' mean and deviation";
      if (n.mean.size() == 1)
        return fmt::format(
            "standardized with the training inputs' mean {:.6g} and deviation {:.6g}", n.mean[0],
            n.deviation[0]);
      return fmt::format(
          "standardized per channel with the training inputs' means [{:.6g}] and deviations "
          "[{:.6g}]",
          fmt::join(n.mean, ", "), fmt::join(n.deviation, ", "));
  }
  return "";
}

torch::Tensor normalized(const torch::Tensor& image, const Normalization& n,
                         const std::string& path) {
  TANDEM_ASSERT(n.mode != Normalize::kDefault, "a data kind resolves the default normalization");
  if (n.mode == Normalize::kNone) return image.to(torch::kFloat32);
  if (n.mode == Normalize::kPerImage)
    return n.head ? head_standardized(image, path) : standardized(image);
  TANDEM_CHECK(!n.mean.empty() && n.mean.size() == n.deviation.size() &&
                   (n.mean.size() == 1 || static_cast<int64_t>(n.mean.size()) == image.size(0)),
               "{} has {} channels, but the training's normalization holds {} means and {} "
               "deviations (one for all channels, or one per channel)",
               path, image.size(0), n.mean.size(), n.deviation.size());
  const torch::Tensor x = image.to(n.in_float32 ? torch::kFloat32 : torch::kFloat64);
  auto scaled = [&](const torch::Tensor& v, size_t i) {
    return (v - n.mean[i]) / (n.deviation[i] > 0 ? n.deviation[i] : 1.0);
  };
  if (n.mean.size() == 1) return scaled(x, 0).to(torch::kFloat32);
  std::vector<torch::Tensor> channels;
  for (int64_t c = 0; c < x.size(0); ++c) channels.push_back(scaled(x[c], static_cast<size_t>(c)));
  return torch::stack(channels).to(torch::kFloat32);
}

torch::Tensor normalized_each(const torch::Tensor& batch, const Normalization& n) {
  if (n.mode == Normalize::kPerImage) {
    std::vector<torch::Tensor> samples;
    for (int64_t b = 0; b < batch.size(0); ++b)
      samples.push_back(normalized(batch[b], n, fmt::format("sample {}", b)));
    return torch::stack(samples);
  }
  if (n.mode == Normalize::kDataset && n.mean.size() > 1) {
    std::vector<torch::Tensor> samples;
    for (int64_t b = 0; b < batch.size(0); ++b) samples.push_back(normalized(batch[b], n));
    return torch::stack(samples);
  }
  return normalized(batch, n);
}

void normalize_each_in_place(torch::Tensor& batch, const Normalization& n) {
  if (n.mode == Normalize::kDataset && n.mean.size() == 1 && n.in_float32 &&
      batch.scalar_type() == torch::kFloat32 && batch.is_contiguous()) {
    // The kernels and scalars of normalized()'s (x - mean) / deviation, in place: the same bits.
    batch.sub_(n.mean[0]).div_(n.deviation[0] > 0 ? n.deviation[0] : 1.0);
    return;
  }
  batch = normalized_each(batch, n);
}

Normalization dataset_moments(const std::vector<torch::Tensor>& images) {
  TANDEM_ASSERT(!images.empty(), "dataset_moments needs at least one image");
  Normalization n;
  n.mode = Normalize::kDataset;
  for (int64_t c = 0; c < images.front().size(0); ++c) {
    std::vector<torch::Tensor> channel;
    for (const torch::Tensor& image : images) channel.push_back(image[c]);
    const Moments m = moments(channel);
    n.mean.push_back(m.mean);
    n.deviation.push_back(m.stddev);
  }
  return n;
}

}  // namespace tandem::data
