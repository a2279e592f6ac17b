// The memory plan as a table, one row per stage (memory_plan_table in memory_plan.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/stage_memory.h"
#include "tandem/memory/bytes.h"
#include "tandem/runtime/memory_plan.h"

namespace tandem::runtime {

std::string memory_plan_table(const graph::Model& model, const LayerBytes& bytes,
                              const graph::Partition& partition, const std::vector<int>& in_flight,
                              bool recompute, const schedule::Schedule* lowered) {
  const char* row = "{:<6} {:<28} {:>7} {:>9} {:>13} {:>11} {:>13} {:>11} {:>12} {:>11} {:>11}\n";
  std::string out = fmt::format(row, "stage", "layers", "FLOPs", "in flight",
                                recompute ? "inputs per mb" : "kept per mb", "workspace",
                                "recv. ahead", "state", "planned peak", "late recv.", "at most");
  const TensorUses uses = index_tensors(model, bytes);
  const Messages m = message_bytes(model, bytes, partition, recompute, lowered);
  auto mib = [](double b) { return memory::format_bytes(static_cast<uint64_t>(b)); };
  const double total_flops = forward_flops(model, 0, static_cast<int>(model.layers.size()));
  std::vector<uint64_t> planned_bytes, at_most_bytes;
  const bool split = splits_backward(lowered);
  const int with_loss = loss_stage(uses, partition);
  // The peaks as every other use of the plan computes them.
  const std::vector<double> plan =
      planned_peaks(model, bytes, partition, in_flight, recompute, lowered);
  const std::vector<double> most =
      stage_peaks(model, bytes, partition, in_flight, recompute, lowered);
  for (int s = 0; s < partition.num_stages; ++s) {
    auto [begin, end] = partition.layers_of(s);
    const StageParts p = stage_parts(uses, bytes, begin, end, recompute, &partition, split);
    // The state column shows the loss stage's scalars with the parameters' state.
    const double scalars = s == with_loss ? loss_scalars(lowered, in_flight[s]) : 0.0;
    const double planned = plan[static_cast<size_t>(s)];
    const double at_most = most[static_cast<size_t>(s)];
    planned_bytes.push_back(static_cast<uint64_t>(planned));
    at_most_bytes.push_back(static_cast<uint64_t>(at_most));
    // The stage's share of the model's forward FLOPs, where the layers know theirs.
    const std::string share =
        total_flops > 0
            ? fmt::format("{:.0f}%", 100 * forward_flops(model, begin, end) / total_flops)
            : "-";
    out += fmt::format(row, s, partition.layer_range(model, s), share, in_flight[s],
                       mib(p.per_microbatch), mib(p.workspace), mib(m.ahead[s]),
                       mib(p.state + scalars), mib(planned), mib(at_most - planned), mib(at_most));
  }
  // The same two columns in bytes, for programs.
  out += fmt::format("planned: peak_bytes={} at_most_bytes={}\n", fmt::join(planned_bytes, ","),
                     fmt::join(at_most_bytes, ","));
  return out;
}

}  // namespace tandem::runtime
