// NumPy .npy arrays (what numpy.save writes), read into tensors and written from them.
//
// Read here by hand: Debian ships no C or C++ library that fits. xtensor's load_npy
// (libxtensor-dev) needs the element type at compile time (the file's own type is only
// reachable through its detail:: namespace), does not check that the file holds the bytes
// its shape needs (a truncated file gives uninitialized values), and reads a version 1.0
// header length through a signed char (a header of 128 bytes or more in its low byte gets a
// wrong length). The format is small (numpy's NEP 1): the magic "\x93NUMPY", a version, a
// little-endian header length, and a Python dict literal {'descr': '<f4', 'fortran_order':
// False, 'shape': (N, ...), } padded with spaces, then the elements in C order.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data {

struct NpyHeader {
  std::string descr;           // numpy's dtype string, e.g. "<f4"
  torch::ScalarType dtype;     // float32 ("<f4"), float64 ("<f8"), uint8 ("|u1"), int64 ("<i8")
  std::vector<int64_t> shape;  // () for a scalar
  int64_t data_offset = 0;     // bytes before the elements
};

// The header of `path`, checked against the file: versions 1.0, 2.0 and 3.0; one of the four
// dtypes above (little-endian); C order (fortran_order False, or an array of at most one
// dimension); and exactly data_offset + elements x element size bytes in the file. Throws
// tandem::Error naming the file and what is wrong (with numpy's way out where there is one).
NpyHeader read_npy_header(const std::string& path);

// The array of `path`, of the file's dtype and shape; checked as read_npy_header checks it.
torch::Tensor read_npy(const std::string& path);

// The bytes of a version 1.0 .npy file holding `array` (float32, float64, uint8 or int64; any
// shape, written in C order), as numpy.load reads it. Throws tandem::Error for another dtype.
std::string npy_bytes(const torch::Tensor& array);

// The shape as numpy prints it: (3,), (2, 4), ().
std::string npy_shape_text(const std::vector<int64_t>& shape);

}  // namespace tandem::data
