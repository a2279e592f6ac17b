// The largest volume that trains under a budget (planner.h: largest_volume).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "memory_partition.h"
#include "tandem/common/check.h"
#include "tandem/common/device.h"
#include "tandem/memory/bytes.h"
#include "tandem/train/planner.h"

namespace tandem::train {

namespace {

// Samples in the largest micro-batch of `batch` in `microbatches`.
int64_t micro_size(int64_t batch, int microbatches) {
  return batch / microbatches + (batch % microbatches ? 1 : 0);
}

std::string size_of(double bytes) { return memory::format_bytes(static_cast<uint64_t>(bytes)); }

// Whether any configuration of `space` fits at c.volume, measuring bytes alone, the leanest
// layouts first (and, where the leanest fits nothing for its activations, only that one); `dead`
// holds the layouts that fit nothing, each with the smallest volume where it did not (skipped at
// that volume and above; set where none fits here). `leanest`: the leanest configuration planned.
// A layout measured: its precision, slabs and micro-batch size.
using LayoutKey = std::tuple<Precision, int, int64_t>;

struct VolumeFit {
  bool fits = false;
  std::optional<PlannedRun> leanest;
};

VolumeFit fits_at(const Config& c, const graph::Model& model, const Source& source,
                  const PlanSpace& space, std::map<LayoutKey, int64_t>& dead, Job* job) {
  const std::vector<DeviceSpec> devices = parse_devices(c.devices, c.threads_per_device);
  // (precision, spatial, micro-batches), leanest first: the reduced precision, the most slabs,
  // the smallest micro-batches.
  std::vector<std::tuple<Precision, int, int>> layouts;
  const std::vector<Precision> precisions =
      space.precisions.empty() ? std::vector<Precision>{c.precision} : space.precisions;
  for (auto p = precisions.rbegin(); p != precisions.rend(); ++p)
    for (auto s = space.spatial.rbegin(); s != space.spatial.rend(); ++s)
      for (auto m = space.microbatches.rbegin(); m != space.microbatches.rend(); ++m)
        layouts.emplace_back(*p, *s, *m);
  VolumeFit out;
  std::set<LayoutKey> measured;
  for (const auto& [precision, s, m] : layouts) {
    const LayoutKey key{precision, s, micro_size(c.batch, m)};
    const auto gone = dead.find(key);
    if ((gone != dead.end() && c.volume >= gone->second) || measured.count(key)) continue;
    measured.insert(key);
    Config layout = c;
    layout.spatial = s;
    layout.microbatches = m;
    layout.precision = precision;
    LayoutCosts l;
    l.spatial = s;
    l.micro = std::get<2>(key);
    l.precision = precision;
    l.bytes = measure_bytes(PlanInputs{model, layout, source, {devices.front()}, false, job});
    // Bytes decide whether it fits: no times (every split then costs the same).
    const size_t n = model.layers.size();
    l.times.forward.assign(n, 0.0);
    l.times.backward.assign(n, 0.0);
    l.times.input.assign(n, 0.0);
    l.times.weight.assign(n, 0.0);
    PlanSpace one = space;
    one.spatial = {s};
    one.precisions = {precision};
    one.microbatches.clear();
    for (int k : space.microbatches)
      if (micro_size(c.batch, k) == std::get<2>(key)) one.microbatches.push_back(k);
    PlanCosts costs;
    costs.layouts = {l};
    const Planning p = plan_search(c, model, one, costs, 1);
    for (const PlannedRun& r : p.runs)
      if (r.why_not.empty() && (!out.leanest || r.peak < out.leanest->peak)) out.leanest = r;
    if (p.chosen()) {
      out.fits = true;
      return out;
    }
    dead[key] = gone == dead.end() ? c.volume : std::min<int64_t>(gone->second, c.volume);
    // The leanest layout fits nothing, and its fullest device is mostly activations: layouts of
    // fewer slabs hold more of every activation on a device (their stages split the layers,
    // which cuts weights, but a stage's micro-batches in flight keep its activations whole), so
    // the volume is taken as too large without measuring them. Where the weights and their
    // state are half of it or more, fewer slabs and more stages may fit: they are measured.
    if (out.leanest) {
      const PlannedRun& r = *out.leanest;
      const size_t g = static_cast<size_t>(
          std::max_element(r.device_peak.begin(), r.device_peak.end()) - r.device_peak.begin());
      if (r.device_state.at(g) < 0.5 * r.peak) return out;
    }
  }
  return out;
}

}  // namespace

LargestVolume largest_volume(const Config& c, int64_t grid,
                             const std::function<ModelAndData(int64_t)>& make,
                             const std::set<std::string>& fixed, int repeats, Job* job) {
  TANDEM_CHECK(grid >= 1, "the grid of volumes must be at least 1, not {}", grid);
  TANDEM_CHECK(c.device_memory > 0,
               "the largest volume is the largest under a budget: give Config::device_memory");
  constexpr int64_t kMost = 4096;  // Config::volume's largest
  LargestVolume out;
  std::map<LayoutKey, int64_t> dead;
  std::map<int64_t, std::string> why;  // a volume that does not fit: why
  auto fits = [&](int64_t v) {
    Config at = c;
    at.volume = static_cast<int>(v);
    bool ok = false;
    try {
      const ModelAndData made = make(v);
      const PlanSpace space = plan_space(at, made.model, *made.source, fixed);
      const VolumeFit f = fits_at(at, made.model, *made.source, space, dead, job);
      ok = f.fits;
      if (!ok && f.leanest) {
        const PlannedRun& r = *f.leanest;
        const size_t g = static_cast<size_t>(
            std::max_element(r.device_peak.begin(), r.device_peak.end()) - r.device_peak.begin());
        why[v] = fmt::format(
            "at volume {} the leanest configuration ({}) plans {} on its fullest device, over "
            "the budget of {}: the weights, their gradients and the optimizer's state take {} of "
            "it, activations, messages and workspaces the rest",
            v, r.flags, size_of(r.peak), size_of(static_cast<double>(c.device_memory)),
            size_of(r.device_state.at(g)));
      } else if (!ok) {
        why[v] =
            fmt::format("at volume {} every layout was over the budget at a smaller volume", v);
      }
    } catch (const Error& e) {
      why[v] = fmt::format("volume {} is refused: {}", v, e.what());
    }
    out.tried.emplace_back(v, ok);
    return ok;
  };
  int64_t lo = 0, hi = 0;  // the largest that fits, the smallest that does not (0: none yet)
  int64_t v = std::max(grid, c.volume / grid * grid);
  if (fits(v)) {
    lo = v;
    while (hi == 0) {
      const int64_t next = std::min(kMost / grid * grid, 2 * lo);
      if (next <= lo) break;  // the largest volume there is fits
      if (fits(next))
        lo = next;
      else
        hi = next;
    }
  } else {
    // Halving down to the grid's first volume, which the data may refuse (a source's smallest
    // side) where a larger one would fit.
    hi = v;
    for (int64_t down = v / 2 / grid * grid; down >= grid && lo == 0;
         down = down / 2 / grid * grid) {
      if (fits(down))
        lo = down;
      else
        hi = down;
    }
  }
  if (lo == 0) {  // why the smallest volume tried does not fit
    out.limit = why.count(hi) ? why[hi] : std::string();
    return out;
  }
  while (hi != 0 && hi - lo > grid) {
    const int64_t mid = (lo + hi) / 2 / grid * grid;
    if (fits(mid))
      lo = mid;
    else
      hi = mid;
  }
  out.volume = lo;
  if (hi != 0) out.limit = why[hi];
  const ModelAndData made = make(lo);
  Config at = c;
  at.volume = static_cast<int>(lo);
  out.planning = plan(at, made.model, *made.source, fixed, repeats, job);
  return out;
}

}  // namespace tandem::train
