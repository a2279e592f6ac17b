// The planning as text and JSON, and a configuration as a command line (planner.h).
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tandem/memory/bytes.h"
#include "tandem/train/options.h"
#include "tandem/train/planner.h"

namespace tandem::train {
namespace {

std::string bytes_text(double bytes) { return memory::format_bytes(static_cast<uint64_t>(bytes)); }

}  // namespace

std::string command_line(const Config& c, int ranks) {
  const Config defaults;
  std::string line = ranks > 0 ? fmt::format("mpirun -n {} tandem train", ranks) : "tandem train";
  for (const ConfigOption& o : config_options()) {
    if (o.flag.empty() || !o.get || o.group == OptionGroup::kVerify) continue;
    const std::string value = o.get(c);
    // What the planner decides is said even where it is the default: the line reads alone.
    const bool decided =
        o.field == "schedule" || o.field == "microbatches" || o.field == "recompute";
    if (value == o.get(defaults) && !decided) continue;
    line += o.value == OptionValue::kSwitch ? " " + o.flag : " " + o.flag + " " + value;
  }
  // bf16 on CPU devices runs only on the processor's own kernels (graph/precision.h), which the
  // command line chooses (the kernels are no Config field).
  if (c.precision == Precision::kBf16) line += " --cpu-kernels native";
  return line;
}

std::string planning_table(const Planning& p, const Config& c, int top) {
  std::string out = fmt::format(
      "costs measured in {:.1f} s ({} layout{} of slabs and micro-batches; the cores compute "
      "at {:.0f}% of their speed alone when all are busy); {} configuration{} planned{}\n",
      p.measure_seconds, p.layouts, p.layouts == 1 ? "" : "s", 100 * p.core_efficiency,
      p.runs.size(), p.runs.size() == 1 ? "" : "s",
      c.device_memory ? fmt::format(" against --device-memory {}", bytes_text(c.device_memory))
                      : "");
  if (!p.transport.latency.empty()) {
    std::vector<std::string> waits;
    for (const auto& [k, seconds] : p.transport.latency)
      waits.push_back(fmt::format("{:.0f} us among {}", 1e6 * seconds, k));
    std::vector<std::string> copies;
    for (const auto& [bytes, seconds] : p.transport.copy)
      if (bytes > 0)
        copies.push_back(fmt::format("{} in {:.0f} us", bytes_text(bytes), 1e6 * seconds));
    out += fmt::format("messages {}: an exchange waits {}; a receiver copies {}\n",
                       p.transport.where, fmt::join(waits, ", "),
                       copies.empty() ? "in no time" : fmt::format("{}", fmt::join(copies, ", ")));
  }
  for (const auto& [spatial, curve] : p.transport.all_reduce) {
    std::vector<std::string> sums;
    for (const auto& [bytes, seconds] : curve)
      if (bytes > 0)
        sums.push_back(fmt::format("{} in {:.0f} us", bytes_text(bytes), 1e6 * seconds));
    out += fmt::format("gradient sums over {} ranks{}: {}\n", c.replicas * spatial,
                       spatial > 1 ? fmt::format(" (--spatial {})", spatial) : "",
                       fmt::join(sums, ", "));
  }
  std::vector<const PlannedRun*> fit, over, cannot;
  for (const PlannedRun& r : p.runs)
    (!r.why_not.empty() ? cannot : r.fits ? fit : over).push_back(&r);
  if (!fit.empty()) {
    out += fmt::format("{:>4}  {:>10}  {:>9}  {:>12}  {}\n", "rank", "samples/s", "step ms",
                       "peak/device", "flags");
    for (size_t k = 0; k < fit.size() && static_cast<int>(k) < top; ++k)
      out += fmt::format("{:>4}  {:>10.2f}  {:>9.1f}  {:>12}  {}\n", k + 1, fit[k]->samples_per_s,
                         fit[k]->step_seconds * 1000, bytes_text(fit[k]->peak), fit[k]->flags);
    if (static_cast<int>(fit.size()) > top)
      out += fmt::format("      ... and {} more that fit\n", fit.size() - top);
  }
  if (!over.empty())
    out += fmt::format(
        "over --device-memory {}: {} configuration{}, planning {} to {} on a device; the leanest: "
        "{}\n",
        bytes_text(c.device_memory), over.size(), over.size() == 1 ? "" : "s",
        bytes_text(over.front()->peak), bytes_text(over.back()->peak), over.front()->flags);
  std::map<std::string, std::vector<const PlannedRun*>> why;
  for (const PlannedRun* r : cannot) why[r->why_not].push_back(r);
  for (const auto& [reason, runs] : why)
    out += fmt::format("cannot run, {} configuration{} (e.g. {}): {}\n", runs.size(),
                       runs.size() == 1 ? "" : "s", runs.front()->flags, reason);
  if (const PlannedRun* best = p.chosen())
    out += fmt::format("chosen: {}\n", command_line(best->config, p.ranks));
  return out;
}

std::string planning_json(const Planning& p, const Config& c) {
  nlohmann::json j;
  j["measure_seconds"] = p.measure_seconds;
  j["layouts"] = p.layouts;
  j["core_efficiency"] = p.core_efficiency;
  nlohmann::json waits = nlohmann::json::object();
  for (const auto& [k, seconds] : p.transport.latency) waits[std::to_string(k)] = seconds;
  j["exchange_seconds"] = waits;
  j["copy_seconds"] = p.transport.copy;  // [bytes, seconds] pairs
  j["transport"] = p.transport.where;
  nlohmann::json sums = nlohmann::json::object();
  for (const auto& [spatial, curve] : p.transport.all_reduce) sums[std::to_string(spatial)] = curve;
  j["all_reduce_seconds"] = sums;  // by --spatial: [bytes, seconds] pairs
  j["ranks"] = p.ranks;
  j["device_memory"] = c.device_memory;
  j["configurations"] = nlohmann::json::array();
  for (const PlannedRun& r : p.runs) {
    nlohmann::json e;
    e["flags"] = r.flags;
    e["fits"] = r.fits;
    if (!r.why_not.empty()) {
      e["cannot_run"] = r.why_not;
    } else {
      e["peak_bytes"] = r.device_peak;
      e["step_seconds"] = r.step_seconds;
      e["samples_per_s"] = r.samples_per_s;
      e["command"] = command_line(r.config, p.ranks);
    }
    j["configurations"].push_back(e);
  }
  if (const PlannedRun* best = p.chosen()) j["chosen"] = command_line(best->config, p.ranks);
  return j.dump(1);
}

}  // namespace tandem::train
