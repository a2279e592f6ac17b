// Single-sample 3D convolutions on the CPU, folded into a batch of two.
//
// LibTorch 1.13 runs a float convolution on the CPU through oneDNN when the batch has more than
// one sample, but a single sample only when C*D*H > 20480 (ATen's ConvParams::use_mkldnn).
// Smaller single samples take an im2col path that costs 3-15x more per sample; a pipeline
// that cuts a batch into single-sample micro-batches hits it at every layer
// (bench/RESULTS.md, "Single-sample 3D convolutions").
//
// A DepthFold cuts the output rows along depth into two halves of `half` rows and gives each
// half the input rows it reads (its slab: `half + kernel - 1` rows, zero rows where the
// convolution pads), so that the slabs go through the same convolution as a batch of two,
// with no padding along depth. Joining the two output halves gives the convolution of the whole
// sample; the fp32 sums of the weight gradient run in another order.
//
// Shapes: x [1,C,D,H,W], weight [Cout,C,k,k,k], stride 1, `depth_padding` before and after
// along depth and `padding` on the other sides (the same for a whole sample; 0 along depth for
// a slab that already holds its halos); output [1,Cout,Do,H',W'] with
// Do = D + 2*depth_padding - k + 1.
#pragma once

#include <torch/types.h>

#include <optional>

namespace tandem::models {

class DepthFold {
 public:
  // The fold of a convolution of `x` by `weight`, or nothing when LibTorch runs it well as it
  // is: a batch other than 1, a device other than the CPU, another dtype, an input above the
  // oneDNN threshold, a build without oneDNN, a 1x1x1 kernel, or fewer than 2 output rows.
  static std::optional<DepthFold> of(const torch::Tensor& x, const torch::Tensor& weight,
                                     int64_t depth_padding, int64_t padding);
  static std::optional<DepthFold> of(const torch::Tensor& x, const torch::Tensor& weight,
                                     int64_t padding) {
    return of(x, weight, padding, padding);
  }

  // x [1,C,D,H,W] -> the two slabs [2,C,half+k-1,H,W].
  torch::Tensor slabs(const torch::Tensor& x) const;
  // The convolution's output on the slabs [2,Cout,half,H',W'] -> [1,Cout,Do,H',W'].
  torch::Tensor join(const torch::Tensor& halves) const;
  // The gradient of the output [1,Cout,Do,H',W'] -> its halves [2,Cout,half,H',W'].
  torch::Tensor split(const torch::Tensor& grad_output) const;
  // The gradient of the slabs [2,C,half+k-1,H,W] -> the gradient of x [1,C,D,H,W]: rows that
  // both slabs read get the sum of both.
  torch::Tensor add_slabs(const torch::Tensor& grad_slabs) const;

  // The padding of the convolution on the slabs: none along depth.
  std::vector<int64_t> slab_padding() const { return {0, padding_, padding_}; }

 private:
  DepthFold(int64_t depth, int64_t depth_padding, int64_t padding, int64_t kernel);

  int64_t depth_;          // D
  int64_t depth_padding_;  // before and after along depth
  int64_t padding_;        // on the other sides
  int64_t out_depth_;      // Do
  int64_t half_;           // output rows per half: ceil(Do / 2)
  int64_t slab_;           // input rows per slab: half + k - 1
};

}  // namespace tandem::models
