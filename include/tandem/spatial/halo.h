// Halo exchange: the planes a convolution on a slab reads from its neighbours' slabs.
//
// Shapes: x [B,C,...] holds d planes along `dim` (the slab). Its halos are the previous slab's
// last w planes (`before`) and the next slab's first w planes (`after`), [.., w, ..] each; zero
// planes stand in at the volume's two ends (where a whole-volume convolution pads with zeros).
// "x with halos" [before, x, after] has w + d + w planes: a "same" convolution of reach 2w
// (odd kernel, stride 1 along `dim`) over it with no padding along `dim` gives exactly the
// slab's rows of the whole volume's convolution.
//
// The halos are messages, never kept beside x for a backward: a backward that needs their
// values again (a weight gradient) asks the neighbours to send them once more (refetch), and
// the neighbours send them from the x their own backward keeps. The gradient of each halo goes
// back to the slab that owns those planes, which adds it to the gradient of its boundary planes
// (return_halo_grads).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/types.h>

#include <string>

namespace tandem::spatial {

class Group;

// One exchange: the halos received, and the names its later messages go by.
struct Halo : torch::CustomClassHolder {
  torch::Tensor before, after;  // [.., width, ..] each; zeros at the volume's ends; may be
                                // released (undefined) between the forward and the backward
  // A dry group's copies of the planes it would have sent, held like a transport holds them
  // until the neighbour takes them; released with before and after.
  std::vector<torch::Tensor> sent;
  Group* group = nullptr;
  std::string name;
  int stage = 0;
  int microbatch = 0;
  int64_t dim = 0;
  int64_t width = 0;
  int64_t depth = 0;  // d, the slab's planes
};

// Forward half, with the current call's slab group (graph::current_call().group, which must
// be set): sends x's first `width` planes to the previous slab and its last to the next,
// receives theirs. Throws tandem::Error when the slab has fewer than `width` planes.
c10::intrusive_ptr<Halo> exchange_halo(const torch::Tensor& x, int64_t dim, int64_t width);

// The same halos again, in a backward: sends x's boundary planes once more (x: the tensor the
// forward exchanged, as the backward keeps it) and fills halo.before and halo.after with the
// neighbours'. Every slab of the group calls it at the same point of the same backward.
void refetch_halo(Halo& halo, const torch::Tensor& x);
// The same for an x given as `parts` concatenated along the channels, without making x: only
// the parts' boundary planes are concatenated.
void refetch_halo(Halo& halo, at::TensorList parts);

// Backward half: sends d(loss)/d(before) and d(loss)/d(after) [.., width, ..] to the slabs
// that own those planes, and adds the gradients the neighbours send back for x's boundary
// planes to `grad_x` [.., d, ..] in place (the previous slab's first, then the next's).
void return_halo_grads(const Halo& halo, const torch::Tensor& grad_before,
                       const torch::Tensor& grad_after, torch::Tensor& grad_x);

// Planes [lo, hi) of x with halos ([before, x, after] along halo.dim, numbered from 0 at
// before's first plane), as a new tensor. Parts not asked for by `real` are zeros of their
// size: the halo convolution's edge pieces need a halo's own terms alone.
struct Parts {
  bool before = true, x = true, after = true;
};
torch::Tensor with_halo_planes(const Halo& halo, const torch::Tensor& x, int64_t lo, int64_t hi,
                               Parts real = {});

}  // namespace tandem::spatial
