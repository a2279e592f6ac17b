#include "tandem/spatial/slabs.h"

#include <algorithm>

#include "tandem/common/check.h"

namespace tandem::spatial {

std::string SlabLayout::describe(int index) const {
  const Slab& s = slabs.at(index);
  return fmt::format("planes {}:{} of {}", s.offset, s.offset + s.size, extent);
}

int most_slabs(int64_t extent, int64_t multiple) {
  if (multiple < 1 || extent < multiple || extent % multiple != 0) return 0;
  return static_cast<int>(extent / multiple);
}

std::vector<Slab> split_extent(int64_t extent, int parts, int64_t multiple) {
  TANDEM_CHECK(parts >= 1, "a volume is cut into at least 1 slab, not {}", parts);
  TANDEM_CHECK(multiple >= 1, "slabs are multiples of at least 1 plane, not {}", multiple);
  TANDEM_CHECK(extent >= 1 && extent % multiple == 0,
               "a depth of {} cannot be cut into slabs of a multiple of {} planes: the depth "
               "must be a multiple of {} (e.g. {})",
               extent, multiple, multiple, (extent / multiple + 1) * multiple);
  const int64_t units = extent / multiple;
  TANDEM_CHECK(units >= parts,
               "{} slabs of at least {} plane{} need a depth of at least {}, not {}: use a "
               "depth of at least {} or at most {} slab{}",
               parts, multiple, multiple == 1 ? "" : "s", parts * multiple, extent,
               parts * multiple, units, units == 1 ? "" : "s");
  std::vector<Slab> out;
  int64_t offset = 0;
  for (int j = 0; j < parts; ++j) {
    const int64_t size = (units / parts + (j < units % parts ? 1 : 0)) * multiple;
    out.push_back({offset, size});
    offset += size;
  }
  return out;
}

HeaviestSlab heaviest_slab(const SlabLayout& layout) {
  TANDEM_ASSERT(!layout.slabs.empty(), "a layout without slabs");
  HeaviestSlab out;
  out.layout = layout;
  out.index = layout.size() >= 3 ? 1 : 0;
  std::vector<Slab>& slabs = out.layout.slabs;
  const auto largest = std::max_element(
      slabs.begin(), slabs.end(), [](const Slab& a, const Slab& b) { return a.size < b.size; });
  std::swap(largest->size, slabs[static_cast<size_t>(out.index)].size);
  int64_t offset = 0;
  for (Slab& s : slabs) {
    s.offset = offset;
    offset += s.size;
  }
  return out;
}

}  // namespace tandem::spatial
