// The window geometry that Conv, ConvTranspose, MaxPool and AveragePool share: kernel,
// strides, dilations and padding over the spatial axes of x [B,C,D...] (1 to 3 of them).
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "operator.h"

namespace tandem::onnx::detail {

struct Window {
  std::vector<int64_t> kernel;     // empty: the weight's (Conv, ConvTranspose)
  std::vector<int64_t> strides;    // empty: 1 per axis
  std::vector<int64_t> dilations;  // empty: 1 per axis
  std::vector<int64_t> pads;       // ONNX order [begin..., end...]; empty: 0 per axis
  std::string auto_pad = "NOTSET";  // NOTSET | SAME_UPPER | SAME_LOWER | VALID

  // The attributes' values filled in for `dims` spatial axes and `kernel`.
  Window filled(size_t dims, c10::IntArrayRef kernel) const;
};

// Reads kernel_shape, strides, dilations, pads and auto_pad; refuses an unknown auto_pad and
// inconsistent lengths.
Window read_window(const Node& node);

// Padding before and after each spatial axis of an input with spatial sizes `spatial`, with
// auto_pad resolved as a convolution or pooling does (SAME: output size ceil(in / stride)).
struct Padding {
  std::vector<int64_t> begin, end;
  bool symmetric() const { return begin == end; }
};
Padding resolve_padding(const Window& filled, c10::IntArrayRef spatial);

// Pads the spatial axes of x [B,C,...] by `p` with `value` (negative entries crop).
torch::Tensor pad_spatial(const torch::Tensor& x, const Padding& p, double value);

// Refuses a tensor that is not [B,C,D...] with 1 to 3 spatial axes (at run time).
void check_spatial(const std::string& node, const char* op, const torch::Tensor& x);

}  // namespace tandem::onnx::detail
