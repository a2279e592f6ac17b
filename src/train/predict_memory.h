// The memory of tandem predict's forward, planned before it runs (runtime/inference_plan.h),
// and what would fit a budget that it exceeds: more slabs, or windows.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <vector>

#include "tandem/graph/model.h"
#include "tandem/graph/partition.h"
#include "tandem/train/run_plan.h"

namespace tandem::train {

// Where the forward runs: the stages, the group of each, the slabs of every group.
struct ForwardLayout {
  graph::Partition partition;
  std::vector<int> stage_group;
  int spatial = 1;
  int64_t workspace_bound = 0;              // the layers' (graph::CallContext::workspace_bound)
  c10::ScalarType precision = c10::kFloat;  // the forwards' (graph::CallContext::precision)
};

// The planned bytes of the forward of `samples` [N,C,D,H,W] on the device that holds the most:
// per group the sum of its stages' planned peaks (runtime::inference_peaks), on the slab that
// holds the most under `layout.spatial`. `job` (may be null): measures once for the job.
double forward_bytes(const graph::Model& model, const torch::Tensor& samples,
                     const ForwardLayout& layout, Job* job);

// What fits `budget` bytes per device when `shape` [N,C,D,H,W] does not (each 0 when nothing
// does): the fewest slabs above layout.spatial (up to 16, as the depth allows) with the same
// stages, and the largest windows (cubes as far as the scan allows, sides multiples of
// `multiple`, at most the scan's `scan` sides) under the layout as it is.
struct ForwardFit {
  int spatial = 0;
  double spatial_bytes = 0;
  std::array<int64_t, 3> window{};
  double window_bytes = 0;
};
ForwardFit forward_fit(const graph::Model& model, const std::vector<int64_t>& shape,
                       const ForwardLayout& layout, const std::array<int64_t, 3>& scan,
                       int64_t multiple, double budget, Job* job);

// The largest windows that fit, alone (forward_fit's second half).
ForwardFit largest_window(const graph::Model& model, const std::vector<int64_t>& shape,
                          const ForwardLayout& layout, const std::array<int64_t, 3>& scan,
                          int64_t multiple, double budget, Job* job);

}  // namespace tandem::train
