// Halo exchange: what a convolution on a slab needs from its neighbours' slabs.
//
// Shapes: x [B,C,...] holds d planes along `dim` (the slab). "x with halos" is
// [.., w + d + w, ..]: the previous slab's last w planes, x, the next slab's first w planes;
// zero planes stand in at the volume's two ends (where a whole-volume convolution pads with
// zeros). A "same" convolution of kernel k (odd, stride 1) over x with halos of w = k / 2 and
// no padding along `dim` gives exactly the slab's rows of the whole volume's convolution.
//
// In the backward the gradient of each halo goes back to the slab that owns those planes, which
// adds it to the gradient of its own boundary planes.
//
// Two ways to use it: with_halo() is an autograd function (any layer); a layer that wants to
// keep only x and the thin halos for its backward, not x with halos (tandem's convolutions),
// calls exchange_halo() in its forward and return_halo_grad() in its backward.
#pragma once

#include <torch/types.h>

#include <ATen/core/ivalue.h>

#include <string>

namespace tandem::spatial {

class Group;

// One exchange: the halos received and what its backward needs to find its messages again.
struct Halo : torch::CustomClassHolder {
  torch::Tensor before, after;  // [.., width, ..] each; zeros at the volume's ends
  Group* group = nullptr;
  std::string name;
  int stage = 0;
  int microbatch = 0;
  int64_t dim = 0;
  int64_t width = 0;
  int64_t depth = 0;  // d, the slab's planes

  // [before, x, after] along dim.
  torch::Tensor around(const torch::Tensor& x) const;
};

// Forward half, with the current call's slab group (graph::current_call().group, which must
// be set): sends x's first `width` planes to the previous slab and its last to the next,
// receives theirs. Throws tandem::Error when the slab has fewer than `width` planes.
c10::intrusive_ptr<Halo> exchange_halo(const torch::Tensor& x, int64_t dim, int64_t width);

// Backward half: `grad` is d(loss)/d(x with halos) [.., w + d + w, ..]. Sends the halos'
// gradients to their owners and returns d(loss)/dx [.., d, ..] with the gradients of x's
// boundary planes that the neighbours send back added (previous slab's first, then next's).
torch::Tensor return_halo_grad(const Halo& halo, const torch::Tensor& grad);

// x with halos, as an autograd function of x. Without a slab group (whole samples): x with
// `width` zero planes on each side of `dim`.
torch::Tensor with_halo(const torch::Tensor& x, int64_t dim, int64_t width);

}  // namespace tandem::spatial
