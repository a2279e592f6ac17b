// NIfTI volumes (.nii and .nii.gz; NIfTI-1 and NIfTI-2), read and written through nifticlib
// (Debian's libnifti2-dev), which does the header parsing, byte swapping and decompression.
//
// Voxel order: NIfTI stores i (x) fastest, then j (y), k (z), then dims 4 to 7 (t, u, v, w).
// Volume::data keeps that memory order, so its shape is [C,Z,Y,X] with C = dim[4] * ... *
// dim[7] (1 for a 3D file): the [C,D,H,W] order of a Conv3d input, and data[c][k][j][i] is
// voxel (i,j,k) of volume c. A 4D file is one volume per channel (e.g. MRI modalities).
//
// nifticlib keeps global state (its debug level); tandem serializes its calls with a mutex,
// so these functions may be called from several threads.
#pragma once

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <string>

namespace tandem::data {

// Volumes in memory.
struct Volume {
  torch::Tensor data;              // [C,Z,Y,X] float32, scaled by scl_slope and scl_inter
  std::array<float, 3> spacing{};  // voxel size per data dim, in the file's units (mm
                                   // usually): {dz, dy, dx} = {pixdim[3], pixdim[2], pixdim[1]}
};

// Reads a NIfTI-1 or NIfTI-2 file: single .nii, gzip .nii.gz, or a .hdr/.img pair (and what
// else nifticlib reads, such as ANALYZE 7.5). Every real datatype is read (int8 to uint64,
// float32, float64, float128) and converted to float32, computed in double as stored *
// scl_slope + scl_inter when scl_slope is nonzero and finite (nifti1.h: otherwise no
// scaling); RGB24 and RGBA32 give 3 and 4 channels per volume. Throws tandem::Error naming
// the file for: a file that does not exist or cannot be read, a gzip file whose name does not
// end in .gz (nifticlib would read its compressed bytes as a header), a header nifticlib
// rejects (with the file's size and its sizeof_hdr field), a complex or unknown datatype
// (named), and voxel data shorter than the header says.
Volume read_nifti(const std::string& path);

// The shape [C,Z,Y,X] of a volume from its header alone (the voxels are not read); the header
// is checked as read_nifti checks it.
std::array<int64_t, 4> read_nifti_shape(const std::string& path);

// NIfTI datatype codes (nifti1.h's DT_*) that write_nifti writes.
enum class NiftiType : int {
  kUInt8 = 2,
  kInt16 = 4,
  kInt32 = 8,
  kFloat32 = 16,
  kFloat64 = 64,
  kInt8 = 256,
  kUInt16 = 512,
  kUInt32 = 768,
  kInt64 = 1024,
  kUInt64 = 1280,
};

struct NiftiWriteOptions {
  NiftiType type = NiftiType::kFloat32;
  float scl_slope = 0.0f;  // 0: no scaling; else the file stores (value - scl_inter) / scl_slope
  float scl_inter = 0.0f;
};

// Writes `volume` (data [Z,Y,X] or [C,Z,Y,X], any real dtype; C > 1 becomes dim[4]) as one
// NIfTI-1 .nii file, or gzip when `path` ends in ".nii.gz". Integer types round to nearest; a value
// that does not fit the type throws. Meant for tests and small tools: it writes a diagonal
// sform from the spacing and nothing else of a full header.
void write_nifti(const std::string& path, const Volume& volume, NiftiWriteOptions options = {});

// Writes `data` ([Z,Y,X] or [C,Z,Y,X], the grid of the file `like`) as a NIfTI-1 file on the
// grid of `like`: its dimensions, voxel sizes and units, qform and sform are kept, so that a
// viewer lays the result over that file; the datatype is `type` (no scaling, no intent). The
// file appears whole or not at all: it is written under a temporary name in the same folder,
// then renamed. Throws tandem::Error naming the file for a grid that differs from like's, a
// name that does not end in .nii or .nii.gz, or a file that cannot be written.
void write_nifti_like(const std::string& path, const std::string& like, const torch::Tensor& data,
                      NiftiType type);

}  // namespace tandem::data
