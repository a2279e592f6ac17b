// The pipeline's tables for people: where each stage runs, and where each layer's forward and
// backward actually ran.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "pipeline_impl.h"

namespace tandem::runtime {

std::string Pipeline::placement_log_table() const {
  const Impl& m = *impl_;
  if (!m.placement_log) return "";
  auto fwd = m.placement_log->forward();
  auto bwd = m.placement_log->backward();
  auto join = [](const std::set<std::string>& s) {
    return s.empty() ? std::string("-") : fmt::format("{}", fmt::join(s, ","));
  };
  std::string out = fmt::format("{:<24} {:<6} {:<16} {:<16}\n", "layer", "stage", "forward ran on",
                                "backward ran on");
  for (int i = 0; i < static_cast<int>(m.model.layers.size()); ++i) {
    out += fmt::format("{:<24} {:<6} {:<16} {:<16}\n", m.model.layers[i].name,
                       m.partition.stage_of_layer[i], join(fwd[i]), join(bwd[i]));
  }
  return out;
}

std::string Pipeline::placement_table(const std::vector<std::string>& hosts) const {
  const Impl& m = *impl_;
  const bool split = schedule::splits_backward(m.train_schedule);
  const bool ranks = !hosts.empty();
  const bool slabs = m.slabs > 1;
  std::string out = fmt::format("{:<6} {:<10} {}{:<28} {:>12}{}{}\n", "stage", "device",
                                ranks ? fmt::format("{:<6} {:<16} ", "rank", "host") : "", "layers",
                                "parameters", slabs ? fmt::format("  {:<22}", "slab") : "",
                                split ? "  split backward (I/W)" : "");
  for (int s = 0; s < m.partition.num_stages; ++s) {
    auto [b, e] = m.partition.layers_of(s);
    int64_t params = 0;
    for (auto& p : m.stage_parameters(s)) params += p.numel();
    std::string split_note;
    if (split) {
      std::vector<std::string> whole;
      for (int i = b; i < e; ++i) {
        if (!m.model.layers[i].splits_backward && m.model.layers[i].module)
          whole.push_back(m.model.layers[i].name);
      }
      split_note =
          whole.empty() ? "  yes" : fmt::format("  all in I for: {}", fmt::join(whole, ", "));
    }
    // One row per device of the stage's group (one device without a spatial split).
    for (int j = 0; j < m.slabs; ++j) {
      const int device = m.stage_device[s] * m.slabs + j;
      std::string rank_host;
      if (ranks) {
        rank_host = fmt::format("{:<6} {:<16} ", device,
                                device < static_cast<int>(hosts.size()) ? hosts[device] : "?");
      }
      out += fmt::format(
          "{:<6} {:<10} {}{:<28} {:>12}{}{}\n", s, m.options.devices[device].name, rank_host,
          fmt::format("{} ({})", m.partition.layer_range(m.model, s), e - b), params,
          slabs ? fmt::format("  {:<22}", m.layout.describe(j)) : "", split_note);
    }
  }
  return out;
}

}  // namespace tandem::runtime
