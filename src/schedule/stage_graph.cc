#include "tandem/schedule/stage_graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tandem/common/check.h"

namespace tandem::schedule {

std::vector<std::vector<int>> StageGraph::producers() const {
  std::vector<std::vector<int>> result(num_stages);
  for (int s = 0; s < static_cast<int>(consumers.size()); ++s) {
    for (int t : consumers[s]) {
      if (t >= 0 && t < num_stages) result[t].push_back(s);
    }
  }
  return result;
}

StageGraph StageGraph::chain(int n) {
  StageGraph graph{n, std::vector<std::vector<int>>(n > 0 ? n : 0)};
  for (int s = 0; s + 1 < n; ++s) graph.consumers[s] = {s + 1};
  return graph;
}

void check_graph(const StageGraph& graph) {
  TANDEM_CHECK(graph.num_stages >= 1, "the stage graph has {} stages; it needs at least 1.",
               graph.num_stages);
  TANDEM_CHECK(static_cast<int>(graph.consumers.size()) == graph.num_stages,
               "the stage graph has {} stages but {} consumer lists; give one list per stage.",
               graph.num_stages, graph.consumers.size());
  for (int s = 0; s < graph.num_stages; ++s) {
    const std::vector<int>& list = graph.consumers[s];
    for (std::size_t i = 0; i < list.size(); ++i) {
      TANDEM_CHECK(list[i] > s && list[i] < graph.num_stages,
                   "stage {} lists consumer {}, but a consumer must be a later stage in {}..{}.", s,
                   list[i], s + 1, graph.num_stages - 1);
      TANDEM_CHECK(i == 0 || list[i - 1] < list[i],
                   "the consumers of stage {} ({}) must be strictly ascending.", s,
                   fmt::join(list, ","));
    }
  }
}

std::string to_string(const StageGraph& graph) {
  std::string text;
  for (int s = 0; s < static_cast<int>(graph.consumers.size()); ++s) {
    if (graph.consumers[s].empty()) continue;
    if (!text.empty()) text += ' ';
    text += fmt::format("{}->{}", s, fmt::join(graph.consumers[s], ","));
  }
  return text.empty() ? "(no edges)" : text;
}

}  // namespace tandem::schedule
