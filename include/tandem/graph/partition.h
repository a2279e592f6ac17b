// Partition: the assignment of layers to stages (contiguous runs) and, from it, which tensors
// cross which stage boundaries.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tandem/graph/model.h"

namespace tandem::graph {

struct Partition {
  // stage_of_layer[i] is the stage of layer i; non-decreasing, starting at 0, no gaps.
  std::vector<int> stage_of_layer;
  int num_stages = 0;

  // [begin, end) layer indices of `stage`.
  std::pair<int, int> layers_of(int stage) const;
  std::vector<int> balance() const;
  // "fc1..fc3": the first and last layer of `stage` (just "fc1" for one layer).
  std::string layer_range(const Model& model, int stage) const;
  std::string to_string(const Model& model) const;  // "fc1..fc3 | fc4..out"
};

// `balance[s]` layers per stage. Throws if the counts do not cover the model exactly.
Partition partition_by_balance(const Model& model, const std::vector<int>& balance);
// Contiguous stages with parameter counts as equal as possible (each stage at least one layer).
Partition partition_by_parameters(const Model& model, int stages);
// Cost of making layers [begin, end) stage `stage`.
using StageCostFn = std::function<double(int stage, int begin, int end)>;
// The largest cost(s, first layer, end) over the stages of `p`.
double costliest_stage(const Partition& p, const StageCostFn& cost);
// Contiguous stages (each at least one layer) that minimize the costliest stage.
Partition partition_by_cost(const Model& model, int stages, const StageCostFn& cost);
// Among the contiguous splits (each stage at least one layer) whose every stage costs at most
// `cap`, the most even: the least sum of the stages' squared costs (none negative). Throws
// when no split is within the cap.
Partition partition_under_cap(const Model& model, int stages, const StageCostFn& cost, double cap);
// As partition_by_cost, then the most even split whose costliest stage is within `slack` (a
// fraction) of the least: costs measured with noise are not told apart closer than that, and a
// nearly free layer (a flatten) joins a neighbour instead of making a stage of its own.
Partition partition_by_cost_evenly(const Model& model, int stages, const StageCostFn& cost,
                                   double slack = 0);
// From a device per layer (the "with device(...)" habit): each maximal run of layers on one
// device is a stage. Returns the partition and the device of each stage.
Partition partition_by_placement(const Model& model, const std::vector<int>& layer_device,
                                 std::vector<int>* stage_device);

// A tensor that one stage sends to another.
struct Crossing {
  std::string tensor;
  int from_stage;  // producer; -1 for the graph input
  int to_stage;
};

// What moves between stages, derived from the model and the partition.
struct Flow {
  int num_stages = 0;
  // Per stage: tensors it receives (from_stage >= 0) and graph inputs it reads (from_stage -1),
  // sorted by (from_stage, tensor).
  std::vector<std::vector<Crossing>> inputs;
  // Per stage: tensors it sends, sorted by (to_stage, tensor). A skip tensor goes straight from
  // its producer to each consuming stage.
  std::vector<std::vector<Crossing>> outputs;
  int loss_stage = 0;  // the stage that produces Model::output

  // consumers[s]: the stages that receive something from s (the schedule's StageGraph).
  std::vector<std::vector<int>> consumers() const;
};

Flow analyze(const Model& model, const Partition& partition);

}  // namespace tandem::graph
