// merge() from chrome_trace.h: per-rank traces onto one clock and one set of rows.
#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "tandem/common/check.h"
#include "tandem/trace/chrome_trace.h"

namespace tandem::trace {
namespace {

// Metadata with one value across all traces keeps its key; a key with differing values
// becomes "key[i]" for each trace i that has it.
std::map<std::string, std::string> merge_metadata(const std::vector<Trace>& traces) {
  std::map<std::string, std::set<std::string>> values;
  for (const Trace& t : traces)
    for (const auto& [key, value] : t.metadata) values[key].insert(value);
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    for (const auto& [key, value] : traces[i].metadata) {
      if (values[key].size() == 1)
        out[key] = value;
      else
        out[key + "[" + std::to_string(i) + "]"] = value;
    }
  }
  return out;
}

}  // namespace

Trace merge(std::vector<Trace> traces, std::vector<double> clock_offsets_us) {
  TANDEM_CHECK(clock_offsets_us.empty() || clock_offsets_us.size() == traces.size(),
               "merge got {} traces but {} clock offsets; pass one offset per trace, or none.",
               traces.size(), clock_offsets_us.size());
  Trace out;
  out.metadata = merge_metadata(traces);
  std::map<int, std::pair<std::string, std::size_t>> owner;  // device -> (name, first trace)
  for (std::size_t i = 0; i < traces.size(); ++i) {
    for (const auto& [device, name] : device_names(traces[i])) {
      auto [it, inserted] = owner.emplace(device, std::make_pair(name, i));
      TANDEM_CHECK(inserted || it->second.first == name,
                   "cannot merge: device {} is \"{}\" in trace {} but \"{}\" in trace {}; number "
                   "devices across ranks (e.g. rank * devices_per_rank + local index).",
                   device, it->second.first, it->second.second, name, i);
    }
    const double offset = clock_offsets_us.empty() ? 0.0 : clock_offsets_us[i];
    for (Span& span : traces[i].spans) {
      span.start_us += offset;
      out.spans.push_back(std::move(span));
    }
    for (Counter& counter : traces[i].counters) {
      counter.ts_us += offset;
      out.counters.push_back(std::move(counter));
    }
  }
  std::stable_sort(out.spans.begin(), out.spans.end(),
                   [](const Span& a, const Span& b) { return a.start_us < b.start_us; });
  std::stable_sort(out.counters.begin(), out.counters.end(),
                   [](const Counter& a, const Counter& b) { return a.ts_us < b.ts_us; });
  return out;
}

}  // namespace tandem::trace
