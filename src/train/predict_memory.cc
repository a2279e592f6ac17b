#include "predict_memory.h"

#include <algorithm>
#include <numeric>

#include "tandem/common/check.h"
#include "tandem/runtime/inference_plan.h"
#include "tandem/spatial/group.h"
#include "tandem/spatial/slabs.h"

namespace tandem::train {

double forward_bytes(const graph::Model& model, const torch::Tensor& samples,
                     const ForwardLayout& layout, Job* job) {
  auto measure = [&] {
    if (layout.spatial == 1)
      return runtime::to_json(runtime::measure_inference_bytes(
          model, samples, nullptr, layout.workspace_bound, layout.precision));
    // The slab that holds the most, with its halos (zeros from a dry group).
    spatial::SlabLayout cut;
    cut.dim = model.slab_dim;
    cut.extent = samples.size(model.slab_dim);
    cut.slabs = spatial::split_extent(cut.extent, layout.spatial, model.slab_multiple);
    const spatial::HeaviestSlab heaviest = spatial::heaviest_slab(cut);
    const spatial::Slab& slab = heaviest.layout.slabs[static_cast<size_t>(heaviest.index)];
    std::vector<int> members(static_cast<size_t>(layout.spatial));
    std::iota(members.begin(), members.end(), 0);
    spatial::Group dry(nullptr, members, heaviest.index, c10::kCPU, heaviest.layout);
    const torch::Tensor input =
        samples.narrow(heaviest.layout.dim, slab.offset, slab.size).contiguous();
    return runtime::to_json(runtime::measure_inference_bytes(
        model, input, &dry, layout.workspace_bound, layout.precision));
  };
  const runtime::InferenceBytes bytes =
      runtime::inference_bytes_from_json(once_for_the_job(job, measure));
  const std::vector<double> peaks = runtime::inference_peaks(model, bytes, layout.partition);
  std::vector<double> per_group;
  for (size_t s = 0; s < peaks.size(); ++s) {
    const auto g = static_cast<size_t>(layout.stage_group.at(s));
    if (per_group.size() <= g) per_group.resize(g + 1, 0.0);
    per_group[g] += peaks[s];
  }
  return *std::max_element(per_group.begin(), per_group.end());
}

namespace {

// Whether `extent` planes can be cut into `spatial` slabs for the model.
bool cuts(const graph::Model& model, int64_t extent, int spatial) {
  if (spatial == 1) return true;
  try {
    spatial::split_extent(extent, spatial, model.slab_multiple);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

ForwardFit largest_window(const graph::Model& model, const std::vector<int64_t>& shape,
                          const ForwardLayout& layout, const std::array<int64_t, 3>& scan,
                          int64_t multiple, double budget, Job* job) {
  ForwardFit fit;
  // Side k x multiple, each axis at most the scan's side (rounded down to the multiple).
  auto window = [&](int64_t k) {
    std::array<int64_t, 3> w{};
    for (size_t i = 0; i < 3; ++i) w[i] = std::min(k * multiple, scan[i] / multiple * multiple);
    return w;
  };
  const int64_t most = *std::max_element(scan.begin(), scan.end()) / multiple;
  const int depth_axis = model.slab_dim - 2;  // D, H or W of a window
  auto usable = [&](int64_t k) {
    const std::array<int64_t, 3> w = window(k);
    return w[0] >= multiple && w[1] >= multiple && w[2] >= multiple &&
           (layout.spatial == 1 ||
            (depth_axis >= 0 && depth_axis < 3 &&
             cuts(model, w[static_cast<size_t>(depth_axis)], layout.spatial)));
  };
  int64_t low = 1;
  while (low <= most && !usable(low)) ++low;
  auto bytes = [&](int64_t k) {
    const std::array<int64_t, 3> w = window(k);
    return forward_bytes(model, torch::zeros({shape[0], shape[1], w[0], w[1], w[2]}), layout, job);
  };
  // The bytes grow with the side: the largest k in [low, most] that fits, by bisection.
  int64_t high = most;
  while (low <= high) {
    const int64_t k = low + (high - low) / 2;
    const double b = bytes(k);
    if (b <= budget) {
      fit.window = window(k);
      fit.window_bytes = b;
      low = k + 1;
    } else {
      high = k - 1;
    }
  }
  return fit;
}

ForwardFit forward_fit(const graph::Model& model, const std::vector<int64_t>& shape,
                       const ForwardLayout& layout, const std::array<int64_t, 3>& scan,
                       int64_t multiple, double budget, Job* job) {
  ForwardFit fit = largest_window(model, shape, layout, scan, multiple, budget, job);
  const int64_t extent = shape.at(static_cast<size_t>(model.slab_dim));
  for (int n = layout.spatial + 1; n <= 16 && model.slab_dim >= 2; ++n) {
    if (!cuts(model, extent, n)) continue;
    ForwardLayout more = layout;
    more.spatial = n;
    const double b = forward_bytes(model, torch::zeros(shape), more, job);
    if (b <= budget) {
      fit.spatial = n;
      fit.spatial_bytes = b;
      break;
    }
  }
  return fit;
}

}  // namespace tandem::train
