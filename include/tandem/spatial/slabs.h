// How a spatial split cuts every sample: along one dimension (depth) into contiguous slabs, one
// per device of a group.
//
// Shapes: B batch, C channels, D,H,W volume. A [B,C,D,H,W] input cut along dim 2 into N slabs
// gives slab j the planes [offset_j, offset_j + size_j) of every sample. Sizes are multiples of
// the model's down-sampling factor (graph::Model::slab_multiple), so pooling and up-sampling
// stay inside slabs, and as even as that allows: the first slabs one multiple larger
// (88 planes, multiple 4, 4 slabs: 24, 24, 20, 20).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::spatial {

struct Slab {
  int64_t offset = 0;  // first plane, at the graph input's resolution
  int64_t size = 0;    // planes
};

// The cut of a spatial split: samples of `extent` planes along dimension `dim` of the graph
// input (and the target) into slabs[j], j the device's index in its group.
struct SlabLayout {
  int dim = -1;
  int64_t extent = 0;
  std::vector<Slab> slabs;

  int size() const { return static_cast<int>(slabs.size()); }
  // "planes 0:48 of 96"
  std::string describe(int index) const;
};

// Cuts `extent` planes into `parts` slabs whose sizes are positive multiples of `multiple`.
// Throws tandem::Error when no such cut exists: an extent that is not a multiple of `multiple`,
// or too small for `parts` slabs (the message says which extents and slab counts work).
std::vector<Slab> split_extent(int64_t extent, int parts, int64_t multiple);

// The slab a memory measurement stands for, in `layout` with its sizes rearranged: the largest
// size, at index 1 where there are 3 or more slabs (neighbours on both sides: the most halo
// planes any slab sends and receives), else at index 0. Every slab of `layout` holds at most
// what it holds.
struct HeaviestSlab {
  SlabLayout layout;
  int index = 0;
};
HeaviestSlab heaviest_slab(const SlabLayout& layout);

// The most slabs `extent` planes can be cut into, each a multiple of `multiple` (0 when
// `extent` is not a multiple of it).
int most_slabs(int64_t extent, int64_t multiple);

}  // namespace tandem::spatial
