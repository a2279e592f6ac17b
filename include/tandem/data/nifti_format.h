// NIfTI-1 header layout and datatype table, shared by the reader and the writer.
// Internal to tandem::data; see nifti.h for the public interface.
#pragma once

#include <cstdint>
#include <cstring>

#include "tandem/data/nifti.h"

namespace tandem::data::nifti_format {

// Byte offsets into the 348-byte header (nifti1.h).
inline constexpr int kHeaderSize = 348;
inline constexpr int kNifti2HeaderSize = 540;
inline constexpr int kSizeofHdr = 0;    // int32, must be 348
inline constexpr int kDim = 40;         // int16[8]: dim[0] = rank, dim[1..] sizes
inline constexpr int kDatatype = 70;    // int16, NiftiType code
inline constexpr int kBitpix = 72;      // int16
inline constexpr int kPixdim = 76;      // float[8]: pixdim[1..3] voxel sizes
inline constexpr int kVoxOffset = 108;  // float: byte offset of the data
inline constexpr int kSclSlope = 112;   // float
inline constexpr int kSclInter = 116;   // float
inline constexpr int kXyztUnits = 123;  // char
inline constexpr int kSformCode = 254;  // int16
inline constexpr int kSrowX = 280;      // float[4] x3: rows of the sform affine
inline constexpr int kMagic = 344;      // "n+1\0" single file, "ni1\0" .hdr/.img pair
// A single file's data starts after the header and the 4-byte extension flag.
inline constexpr int kMinVoxOffset = 352;

// Bytes per element of a supported datatype code, or 0 when the code is not supported.
inline int element_bytes(int16_t code) {
  switch (static_cast<NiftiType>(code)) {
    case NiftiType::kUInt8:
    case NiftiType::kInt8:
      return 1;
    case NiftiType::kInt16:
    case NiftiType::kUInt16:
      return 2;
    case NiftiType::kInt32:
    case NiftiType::kUInt32:
    case NiftiType::kFloat32:
      return 4;
    case NiftiType::kFloat64:
      return 8;
  }
  return 0;
}

// Reverses the bytes of one `width`-byte value in place.
inline void swap_bytes(uint8_t* p, int width) {
  for (int a = 0, b = width - 1; a < b; ++a, --b) {
    uint8_t t = p[a];
    p[a] = p[b];
    p[b] = t;
  }
}

// Reads a T at `offset` of `bytes`, byte-swapped when `swap`.
template <typename T>
T load(const uint8_t* bytes, int offset, bool swap) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, bytes + offset, sizeof(T));
  if (swap) swap_bytes(raw, sizeof(T));
  T value;
  std::memcpy(&value, raw, sizeof(T));
  return value;
}

// Writes a T at `offset` of `bytes`, byte-swapped when `swap`.
template <typename T>
void store(uint8_t* bytes, int offset, T value, bool swap) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  if (swap) swap_bytes(raw, sizeof(T));
  std::memcpy(bytes + offset, raw, sizeof(T));
}

}  // namespace tandem::data::nifti_format
