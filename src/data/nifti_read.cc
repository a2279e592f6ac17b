#include <cmath>
#include <vector>

#include "tandem/common/check.h"
#include "tandem/data/file_bytes.h"
#include "tandem/data/nifti.h"
#include "tandem/data/nifti_format.h"

namespace tandem::data {
namespace {
namespace nf = nifti_format;

// Decides the byte order from sizeof_hdr, and rejects what is not a NIfTI-1 header.
bool check_header(const std::string& path, const std::vector<uint8_t>& bytes) {
  TANDEM_CHECK(bytes.size() >= static_cast<size_t>(nf::kHeaderSize),
               "'{}' is not a NIfTI-1 file: it holds {} bytes, fewer than the {}-byte header.",
               path, bytes.size(), nf::kHeaderSize);
  const auto le = nf::load<int32_t>(bytes.data(), nf::kSizeofHdr, false);
  const auto be = nf::load<int32_t>(bytes.data(), nf::kSizeofHdr, true);
  TANDEM_CHECK(le != nf::kNifti2HeaderSize && be != nf::kNifti2HeaderSize,
               "'{}' is a NIfTI-2 file (sizeof_hdr 540); tandem reads NIfTI-1 only. Convert it, "
               "e.g. with `nibabel` or `fslchfiletype NIFTI_GZ`.",
               path);
  TANDEM_CHECK(le == nf::kHeaderSize || be == nf::kHeaderSize,
               "'{}' is not a NIfTI-1 file: sizeof_hdr is {} (expected 348 in either byte order).",
               path, le);
  const bool swap = le != nf::kHeaderSize;
  const char* magic = reinterpret_cast<const char*>(bytes.data() + nf::kMagic);
  TANDEM_CHECK(std::memcmp(magic, "ni1", 4) != 0,
               "'{}' is the header of a NIfTI-1 .hdr/.img pair (magic \"ni1\"); tandem reads "
               "single-file volumes only. Convert it to .nii.gz, e.g. with `fslchfiletype "
               "NIFTI_GZ`.",
               path);
  TANDEM_CHECK(std::memcmp(magic, "n+1", 4) == 0,
               "'{}' has magic {:02x} {:02x} {:02x} {:02x}, not \"n+1\\0\": it is not a "
               "single-file NIfTI-1 volume (an ANALYZE 7.5 header, perhaps). Convert it to "
               ".nii.gz.",
               path, uint8_t(magic[0]), uint8_t(magic[1]), uint8_t(magic[2]), uint8_t(magic[3]));
  return swap;
}

// Converts `n` stored elements of type T to float, scaling when slope != 0.
template <typename T>
void convert(const uint8_t* src, int64_t n, bool swap, double slope, double inter, float* dst) {
  const bool scale = slope != 0.0;
  for (int64_t i = 0; i < n; ++i) {
    auto v = static_cast<double>(nf::load<T>(src, static_cast<int>(i * sizeof(T)), swap));
    dst[i] = static_cast<float>(scale ? v * slope + inter : v);
  }
}

void convert_any(NiftiType type, const uint8_t* src, int64_t n, bool swap, double slope,
                 double inter, float* dst) {
  switch (type) {
    case NiftiType::kUInt8:
      return convert<uint8_t>(src, n, swap, slope, inter, dst);
    case NiftiType::kInt8:
      return convert<int8_t>(src, n, swap, slope, inter, dst);
    case NiftiType::kInt16:
      return convert<int16_t>(src, n, swap, slope, inter, dst);
    case NiftiType::kUInt16:
      return convert<uint16_t>(src, n, swap, slope, inter, dst);
    case NiftiType::kInt32:
      return convert<int32_t>(src, n, swap, slope, inter, dst);
    case NiftiType::kUInt32:
      return convert<uint32_t>(src, n, swap, slope, inter, dst);
    case NiftiType::kFloat32:
      return convert<float>(src, n, swap, slope, inter, dst);
    case NiftiType::kFloat64:
      return convert<double>(src, n, swap, slope, inter, dst);
  }
}

// The volume's size (x, y, z) and voxel bytes from a checked header.
struct Dims {
  int64_t size[3] = {1, 1, 1};  // x, y, z
  int16_t code = 0;
  int width = 0;
};

Dims read_dims(const std::string& path, const uint8_t* h, bool swap) {
  Dims out;
  int16_t dim[8];
  for (int d = 0; d < 8; ++d) dim[d] = nf::load<int16_t>(h, nf::kDim + 2 * d, swap);
  TANDEM_CHECK(dim[0] >= 1 && dim[0] <= 7, "'{}' has dim[0] = {}; it must be 1..7.", path, dim[0]);
  for (int d = 1; d <= dim[0]; ++d) {
    TANDEM_CHECK(dim[d] >= 1, "'{}' has dim[{}] = {}; sizes must be positive.", path, d, dim[d]);
    if (d <= 3) out.size[d - 1] = dim[d];
    TANDEM_CHECK(d <= 3 || dim[d] == 1,
                 "'{}' holds more than one 3D volume (dim[{}] = {}); tandem reads 3D volumes. "
                 "Extract one first, e.g. with `fslroi`.",
                 path, d, dim[d]);
  }
  out.code = nf::load<int16_t>(h, nf::kDatatype, swap);
  out.width = nf::element_bytes(out.code);
  TANDEM_CHECK(out.width > 0,
               "'{}' has NIfTI datatype code {}, which tandem does not read; supported codes: 2 "
               "(uint8), 4 (int16), 8 (int32), 16 (float32), 64 (float64), 256 (int8), 512 "
               "(uint16), 768 (uint32).",
               path, out.code);
  return out;
}

}  // namespace

std::array<int64_t, 3> read_nifti_shape(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_prefix(path, nf::kHeaderSize);
  const bool swap = check_header(path, bytes);
  const Dims dims = read_dims(path, bytes.data(), swap);
  return {dims.size[2], dims.size[1], dims.size[0]};
}

Volume read_nifti(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  const bool swap = check_header(path, bytes);
  const uint8_t* h = bytes.data();
  const Dims dims = read_dims(path, h, swap);
  const int64_t* size = dims.size;
  const int16_t code = dims.code;
  const int width = dims.width;

  const float vox_offset = nf::load<float>(h, nf::kVoxOffset, swap);
  TANDEM_CHECK(std::isfinite(vox_offset) && vox_offset >= nf::kHeaderSize &&
                   vox_offset == std::floor(vox_offset),
               "'{}' has vox_offset {}; it must be a whole number of bytes >= {} (the header).",
               path, vox_offset, nf::kHeaderSize);
  const int64_t count = size[0] * size[1] * size[2];
  const auto offset = static_cast<int64_t>(vox_offset);
  const int64_t expected = offset + count * width;
  TANDEM_CHECK(static_cast<int64_t>(bytes.size()) >= expected,
               "'{}' is truncated: dims {}x{}x{} of {}-byte voxels at offset {} need {} bytes but "
               "the (decompressed) file holds {}. Copy or download it again.",
               path, size[0], size[1], size[2], width, offset, expected, bytes.size());

  double slope = nf::load<float>(h, nf::kSclSlope, swap);
  double inter = nf::load<float>(h, nf::kSclInter, swap);
  if (!std::isfinite(slope) || !std::isfinite(inter)) slope = 0.0;  // nifti1.h: ignore scaling

  Volume out;
  out.data = torch::empty({size[2], size[1], size[0]}, torch::kFloat32);
  convert_any(static_cast<NiftiType>(code), h + offset, count, swap, slope, inter,
              out.data.data_ptr<float>());
  for (int d = 0; d < 3; ++d) {
    float p = std::fabs(nf::load<float>(h, nf::kPixdim + 4 * (3 - d), swap));
    out.spacing[d] = std::isfinite(p) && p > 0.0f ? p : 1.0f;  // unset pixdim: assume 1
  }
  return out;
}

}  // namespace tandem::data
