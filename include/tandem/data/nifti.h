// Single-file NIfTI-1 volumes (.nii and .nii.gz): a reader and a small writer.
//
// Voxel order: NIfTI stores i (x) fastest, then j (y), then k (z). Volume::data keeps that
// memory order unchanged, so its shape is [Z,Y,X] = [dim[3], dim[2], dim[1]]: the same
// [D,H,W] order a Conv3d input uses, and data[k][j][i] is NIfTI voxel (i,j,k).
#pragma once

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <string>

namespace tandem::data {

// A 3D scalar volume in memory.
struct Volume {
  torch::Tensor data;              // [Z,Y,X] float32, scaled by scl_slope/scl_inter
  std::array<float, 3> spacing{};  // voxel size per data dim, in the file's units (mm
                                   // usually): {dz, dy, dx} = {pixdim[3], pixdim[2], pixdim[1]}
};

// NIfTI-1 datatype codes that read_nifti accepts (all are converted to float32).
enum class NiftiType : int16_t {
  kUInt8 = 2,
  kInt16 = 4,
  kInt32 = 8,
  kFloat32 = 16,
  kFloat64 = 64,
  kInt8 = 256,
  kUInt16 = 512,
  kUInt32 = 768,
};

// Reads a .nii or .nii.gz file (gzip detected by its magic bytes). Little- and big-endian
// files are both read. dim[0] may be 1..7; dims beyond the third must be 1 (one 3D volume).
// When scl_slope != 0 the returned data are stored * scl_slope + scl_inter. Throws
// tandem::Error naming the file for: a missing file, a header that is not NIfTI-1 (bad
// sizeof_hdr, NIfTI-2, a .hdr/.img pair magic "ni1"), bad dims, an unsupported datatype
// (naming its code), a vox_offset before the end of the header, or a file shorter than
// vox_offset + data bytes (with both numbers).
Volume read_nifti(const std::string& path);

// The shape [Z,Y,X] of a .nii or .nii.gz volume from its header alone (the voxels are not
// read); the header is checked as read_nifti checks it.
std::array<int64_t, 3> read_nifti_shape(const std::string& path);

struct NiftiWriteOptions {
  NiftiType type = NiftiType::kFloat32;
  float scl_slope = 0.0f;  // 0: no scaling; else the file stores (value - scl_inter) / scl_slope
  float scl_inter = 0.0f;
  bool big_endian = false;  // write a byte-swapped file (to test the reader)
};

// Writes `volume` (data [Z,Y,X], any real dtype) as a single-file NIfTI-1 volume, gzip when
// `path` ends in ".gz". Integer types round to nearest; a value that does not fit the type
// throws. Meant for tests and small tools, not for preserving a full header.
void write_nifti(const std::string& path, const Volume& volume, NiftiWriteOptions options = {});

}  // namespace tandem::data
