// A slab's bytes against one device's for the same voxels (slab_bytes_table in memory_plan.h).
#include <fmt/format.h>

#include <algorithm>

#include "tandem/common/check.h"
#include "tandem/memory/bytes.h"
#include "tandem/runtime/memory_plan.h"

namespace tandem::runtime {

namespace {

void check_same_layers(const graph::Model& model, const LayerBytes& whole, const LayerBytes& slab) {
  const size_t n = model.layers.size();
  TANDEM_CHECK(whole.activations.size() == n && slab.activations.size() == n &&
                   whole.transient.size() == n && slab.transient.size() == n &&
                   slab.halo.size() == n,
               "memory was measured for {} and {} layers but model '{}' has {}",
               whole.activations.size(), slab.activations.size(), model.name, n);
}

double sum(const std::vector<uint64_t>& v) {
  double s = 0;
  for (uint64_t b : v) s += static_cast<double>(b);
  return s;
}

double ratio(double a, double b) { return b > 0 ? a / b : 1.0; }

}  // namespace

SlabRatios slab_ratios(const graph::Model& model, const LayerBytes& whole, const LayerBytes& slab) {
  check_same_layers(model, whole, slab);
  const int n = static_cast<int>(model.layers.size());
  SlabRatios r;
  r.kept = ratio(sum(slab.activations), sum(whole.activations));
  r.peak =
      ratio(stage_bytes(model, slab, 0, n, 1, false), stage_bytes(model, whole, 0, n, 1, false));
  return r;
}

std::string slab_bytes_table(const graph::Model& model, const LayerBytes& whole,
                             const LayerBytes& slab) {
  check_same_layers(model, whole, slab);
  auto b = [](double v) { return memory::format_bytes(static_cast<uint64_t>(v)); };
  const char* row = "{:<28} {:>13} {:>13} {:>11} {:>13} {:>13}\n";
  std::string out =
      "a slab against one device on the same voxels (bytes of one micro-batch; the slab's halo "
      "planes are messages, kept by no layer):\n";
  out += fmt::format(row, "layer", "kept, 1 device", "kept, slab", "halo", "workspace, 1",
                     "workspace, slab");
  double largest_whole = 0, largest_slab = 0;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    out += fmt::format(row, model.layers[i].name, b(whole.activations[i]), b(slab.activations[i]),
                       b(slab.halo[i]), b(whole.transient[i]), b(slab.transient[i]));
    largest_whole = std::max(largest_whole, static_cast<double>(whole.transient[i]));
    largest_slab = std::max(largest_slab, static_cast<double>(slab.transient[i]));
  }
  const SlabRatios r = slab_ratios(model, whole, slab);
  const int n = static_cast<int>(model.layers.size());
  out += fmt::format(
      "slab / 1 device: kept {} / {} ({:.3f}), largest workspace {} / {} ({:.3f}), planned peak "
      "of one stage of every layer {} / {} ({:.3f})\n",
      b(sum(slab.activations)), b(sum(whole.activations)), r.kept, b(largest_slab),
      b(largest_whole), ratio(largest_slab, largest_whole),
      b(stage_bytes(model, slab, 0, n, 1, false)), b(stage_bytes(model, whole, 0, n, 1, false)),
      r.peak);
  return out;
}

}  // namespace tandem::runtime
