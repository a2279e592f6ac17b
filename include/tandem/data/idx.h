// The IDX array format (MNIST, Fashion-MNIST), plain or gzip.
//
// Layout: bytes 0,1 are zero; byte 2 is the element type; byte 3 the number of dimensions
// n; then n big-endian uint32 sizes; then the elements, big-endian, last dimension fastest.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data {

// IDX element type codes.
enum class IdxType : uint8_t {
  kUInt8 = 0x08,
  kInt8 = 0x09,
  kInt16 = 0x0B,
  kInt32 = 0x0C,
  kFloat32 = 0x0D,
  kFloat64 = 0x0E,
};

// Reads an IDX file (gzip detected by its magic bytes, not its name). Returns a CPU tensor
// whose shape is the file's dims and whose dtype matches the element type (uint8, int8,
// int16, int32, float32, float64). Throws tandem::Error naming the file for a missing file,
// a bad magic, an unknown type code, or a size that disagrees with the dims.
torch::Tensor read_idx(const std::string& path);

// What an IDX file's header says: its element type code (byte 2, IdxType or another value)
// and its dims. Only the header is read. Throws like read_idx for a missing file, a bad magic
// or a header cut short; the type code is not checked.
struct IdxHeader {
  uint8_t type = 0;
  std::vector<int64_t> dims;
};
IdxHeader read_idx_header(const std::string& path);

// The dims of an IDX file, from its header alone (the data is not read).
std::vector<int64_t> read_idx_dims(const std::string& path);

// "unsigned bytes (0x08)", "32-bit floats (0x0d)", ... for messages.
std::string idx_type_name(uint8_t code);

// Writes `array` (any of the dtypes above, at least one dimension) as an IDX file,
// gzip-compressed when `gzip` is true. Used by tests and tools to make small files.
void write_idx(const std::string& path, const torch::Tensor& array, bool gzip = false);

}  // namespace tandem::data
