#include "tandem/graph/partition.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "tandem/common/check.h"

namespace tandem::graph {

std::pair<int, int> Partition::layers_of(int stage) const {
  int begin = -1, end = -1;
  for (int i = 0; i < static_cast<int>(stage_of_layer.size()); ++i) {
    if (stage_of_layer[i] == stage) {
      if (begin < 0) begin = i;
      end = i + 1;
    }
  }
  TANDEM_ASSERT(begin >= 0, "stage {} has no layers", stage);
  return {begin, end};
}

std::vector<int> Partition::balance() const {
  std::vector<int> b(num_stages, 0);
  for (int s : stage_of_layer) ++b[s];
  return b;
}

std::string Partition::layer_range(const Model& model, int stage) const {
  auto [b, e] = layers_of(stage);
  return e - b > 1 ? model.layers[b].name + ".." + model.layers[e - 1].name : model.layers[b].name;
}

std::string Partition::to_string(const Model& model) const {
  std::string out;
  for (int s = 0; s < num_stages; ++s) out += (s ? " | " : "") + layer_range(model, s);
  return out;
}

namespace {
std::vector<std::string> layer_names(const Model& model) {
  std::vector<std::string> names;
  for (const auto& l : model.layers) names.push_back(l.name);
  return names;
}
}  // namespace

Partition partition_by_balance(const Model& model, const std::vector<int>& balance) {
  const int n = static_cast<int>(model.layers.size());
  TANDEM_CHECK(!balance.empty(), "the balance is empty; give the number of layers per stage");
  for (int b : balance) {
    TANDEM_CHECK(b > 0, "balance {} has a stage with {} layers; every stage needs at least one",
                 fmt::join(balance, ","), b);
  }
  const int total = std::accumulate(balance.begin(), balance.end(), 0);
  TANDEM_CHECK(total == n, "balance {} covers {} layers but the model has {} (layers: {})",
               fmt::join(balance, ","), total, n, fmt::join(layer_names(model), ", "));
  Partition p;
  p.num_stages = static_cast<int>(balance.size());
  for (int s = 0; s < p.num_stages; ++s)
    p.stage_of_layer.insert(p.stage_of_layer.end(), balance[s], s);
  return p;
}

namespace {

// Contiguous stages (each at least one layer) that minimize the stages' costs combined: their
// maximum, or with `sum` their sum. Dynamic programming over (first i layers, k stages); among
// equal splits, the earliest cut. None when every split costs infinity.
std::optional<Partition> least_split(const Model& model, int stages, const StageCostFn& cost,
                                     bool sum) {
  const int n = static_cast<int>(model.layers.size());
  TANDEM_CHECK(stages >= 1, "the number of stages must be at least 1, not {}", stages);
  TANDEM_CHECK(stages <= n, "{} stages need at least {} layers, but model '{}' has {} (layers: {})",
               stages, stages, model.name, n, fmt::join(layer_names(model), ", "));
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    for (int i = k; i <= n - (stages - k); ++i) {
      for (int j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == inf) continue;
        const double c = cost(k - 1, j, i);
        const double v = sum ? best[k - 1][j] + c : std::max(best[k - 1][j], c);
        if (v < best[k][i]) {
          best[k][i] = v;
          cut[k][i] = j;
        }
      }
    }
  }
  if (best[stages][n] == inf) return std::nullopt;
  std::vector<int> balance(stages);
  for (int k = stages, i = n; k >= 1; --k) {
    const int j = cut[k][i];
    balance[k - 1] = i - j;
    i = j;
  }
  return partition_by_balance(model, balance);
}

}  // namespace

double costliest_stage(const Partition& p, const StageCostFn& cost) {
  double costliest = 0;
  for (int s = 0; s < p.num_stages; ++s) {
    auto [b, e] = p.layers_of(s);
    costliest = std::max(costliest, cost(s, b, e));
  }
  return costliest;
}

Partition partition_by_cost(const Model& model, int stages, const StageCostFn& cost) {
  std::optional<Partition> least = least_split(model, stages, cost, /*sum=*/false);
  TANDEM_CHECK(least, "every split of model '{}' into {} stages costs infinity", model.name,
               stages);
  return *least;
}

Partition partition_under_cap(const Model& model, int stages, const StageCostFn& cost, double cap) {
  std::optional<Partition> even = least_split(
      model, stages,
      [&](int s, int b, int e) {
        const double c = cost(s, b, e);
        TANDEM_CHECK(c >= 0, "stage {} (layers {}..{}) has a negative cost ({})", s, b, e - 1, c);
        return c > cap ? std::numeric_limits<double>::infinity() : c * c;
      },
      /*sum=*/true);
  TANDEM_CHECK(even, "no split of model '{}' into {} stages keeps every stage's cost within {}",
               model.name, stages, cap);
  return *even;
}

Partition partition_by_cost_evenly(const Model& model, int stages, const StageCostFn& cost,
                                   double slack) {
  TANDEM_CHECK(slack >= 0, "the slack on the costliest stage must not be negative, not {}", slack);
  const double costliest = costliest_stage(partition_by_cost(model, stages, cost), cost);
  // The least split itself is within the cap (its costs computed the same way).
  return partition_under_cap(model, stages, cost, costliest * (1 + slack));
}

Partition partition_by_parameters(const Model& model, int stages) {
  const int n = static_cast<int>(model.layers.size());
  // Weight of a layer: its parameter count, plus one so that parameterless layers still count.
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    int64_t c = 1;
    for (const auto& p : named_parameters(model.layers[i])) c += p.second.numel();
    prefix[i + 1] = prefix[i] + static_cast<double>(c);
  }
  return partition_by_cost(model, stages,
                           [&prefix](int, int b, int e) { return prefix[e] - prefix[b]; });
}

Partition partition_by_placement(const Model& model, const std::vector<int>& layer_device,
                                 std::vector<int>* stage_device) {
  TANDEM_CHECK(layer_device.size() == model.layers.size(),
               "placement names {} devices but the model has {} layers (layers: {})",
               layer_device.size(), model.layers.size(), fmt::join(layer_names(model), ", "));
  Partition p;
  std::vector<int> devices;
  for (size_t i = 0; i < layer_device.size(); ++i) {
    TANDEM_CHECK(layer_device[i] >= 0, "layer '{}' is placed on device {}, which does not exist",
                 model.layers[i].name, layer_device[i]);
    if (i == 0 || layer_device[i] != layer_device[i - 1]) devices.push_back(layer_device[i]);
    p.stage_of_layer.push_back(static_cast<int>(devices.size()) - 1);
  }
  p.num_stages = static_cast<int>(devices.size());
  if (stage_device) *stage_device = devices;
  return p;
}

std::vector<std::vector<int>> Flow::consumers() const {
  std::vector<std::vector<int>> out(num_stages);
  for (int s = 0; s < num_stages; ++s) {
    std::set<int> to;
    for (const auto& c : outputs[s]) to.insert(c.to_stage);
    out[s].assign(to.begin(), to.end());
  }
  return out;
}

Flow analyze(const Model& model, const Partition& partition) {
  model.validate();
  const int n = static_cast<int>(model.layers.size());
  TANDEM_CHECK(static_cast<int>(partition.stage_of_layer.size()) == n,
               "the partition covers {} layers but the model has {}",
               partition.stage_of_layer.size(), n);
  for (int i = 0; i < n; ++i) {
    int s = partition.stage_of_layer[i];
    int prev = i ? partition.stage_of_layer[i - 1] : 0;
    TANDEM_CHECK(s == prev || s == prev + 1,
                 "layer '{}' is in stage {} after a layer of stage {}: stages must be contiguous "
                 "runs of layers numbered from 0",
                 model.layers[i].name, s, prev);
  }
  TANDEM_CHECK(partition.stage_of_layer.front() == 0 &&
                   partition.stage_of_layer.back() == partition.num_stages - 1,
               "the partition numbers {} stages but uses stages {}..{}", partition.num_stages,
               partition.stage_of_layer.front(), partition.stage_of_layer.back());

  Flow f;
  f.num_stages = partition.num_stages;
  f.inputs.resize(f.num_stages);
  f.outputs.resize(f.num_stages);
  std::map<std::string, int> producer_stage{{model.input, -1}};
  std::set<std::tuple<int, int, std::string>> seen;  // (from, to, tensor)
  for (int i = 0; i < n; ++i) {
    const auto& l = model.layers[i];
    int s = partition.stage_of_layer[i];
    for (const auto& t : l.inputs) {
      int from = producer_stage.at(t);
      if (from == s || !seen.insert({from, s, t}).second) continue;
      f.inputs[s].push_back({t, from, s});
      if (from >= 0) f.outputs[from].push_back({t, from, s});
    }
    for (const auto& t : l.outputs) producer_stage[t] = s;
  }
  f.loss_stage = producer_stage.at(model.output);
  TANDEM_CHECK(f.loss_stage == f.num_stages - 1,
               "the loss tensor '{}' is produced in stage {} but the last stage is {}: the layers "
               "after it would never train; end the model with the layer that produces it",
               model.output, f.loss_stage, f.num_stages - 1);
  auto by_from = [](const Crossing& a, const Crossing& b) {
    return std::tie(a.from_stage, a.tensor) < std::tie(b.from_stage, b.tensor);
  };
  auto by_to = [](const Crossing& a, const Crossing& b) {
    return std::tie(a.to_stage, a.tensor) < std::tie(b.to_stage, b.tensor);
  };
  for (auto& v : f.inputs) std::sort(v.begin(), v.end(), by_from);
  for (auto& v : f.outputs) std::sort(v.begin(), v.end(), by_to);
  return f;
}

}  // namespace tandem::graph
