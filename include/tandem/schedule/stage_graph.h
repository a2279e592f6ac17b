// Which stages read which stages' outputs in the forward pass. A chain has consumers[s] = {s+1};
// skip connections (a U-Net's encoder feeding its decoder) add later consumers. Backward data
// flows the other way: d(loss)/d(outputs of s) is gathered from every consumer of s.
#pragma once

#include <string>
#include <vector>

namespace tandem::schedule {

struct StageGraph {
  int num_stages = 0;
  // consumers[s]: the stages t > s that read a tensor produced by stage s, strictly ascending.
  std::vector<std::vector<int>> consumers;

  // producers()[t]: the stages whose outputs stage t reads, strictly ascending.
  std::vector<std::vector<int>> producers() const;
  // 0 -> 1 -> ... -> n-1.
  static StageGraph chain(int n);

  bool operator==(const StageGraph& other) const {
    return num_stages == other.num_stages && consumers == other.consumers;
  }
};

// Throws tandem::Error unless num_stages >= 1, consumers has num_stages entries and every
// consumers[s] is strictly ascending within (s, num_stages).
void check_graph(const StageGraph& graph);

// "0->1,3 1->2 2->3" (stages without consumers are left out; "(no edges)" when there are none).
std::string to_string(const StageGraph& graph);

}  // namespace tandem::schedule
