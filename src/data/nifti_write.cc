#include <cmath>
#include <limits>
#include <vector>

#include "tandem/common/check.h"
#include "tandem/data/file_bytes.h"
#include "tandem/data/nifti.h"
#include "tandem/data/nifti_format.h"

namespace tandem::data {
namespace {
namespace nf = nifti_format;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Stores `n` values as T: integers round to nearest and must fit the type.
template <typename T>
void store_all(const std::string& path, const double* values, int64_t n, bool swap, uint8_t* dst) {
  for (int64_t i = 0; i < n; ++i) {
    double v = values[i];
    if (std::numeric_limits<T>::is_integer) {
      v = std::nearbyint(v);
      TANDEM_CHECK(v >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
                       v <= static_cast<double>(std::numeric_limits<T>::max()),
                   "write_nifti '{}': value {} at voxel {} does not fit the datatype; choose a "
                   "wider type or a scl_slope.",
                   path, values[i], i);
    }
    nf::store<T>(dst, static_cast<int>(i * sizeof(T)), static_cast<T>(v), swap);
  }
}

void store_any(const std::string& path, NiftiType type, const double* v, int64_t n, bool swap,
               uint8_t* dst) {
  switch (type) {
    case NiftiType::kUInt8:
      return store_all<uint8_t>(path, v, n, swap, dst);
    case NiftiType::kInt8:
      return store_all<int8_t>(path, v, n, swap, dst);
    case NiftiType::kInt16:
      return store_all<int16_t>(path, v, n, swap, dst);
    case NiftiType::kUInt16:
      return store_all<uint16_t>(path, v, n, swap, dst);
    case NiftiType::kInt32:
      return store_all<int32_t>(path, v, n, swap, dst);
    case NiftiType::kUInt32:
      return store_all<uint32_t>(path, v, n, swap, dst);
    case NiftiType::kFloat32:
      return store_all<float>(path, v, n, swap, dst);
    case NiftiType::kFloat64:
      return store_all<double>(path, v, n, swap, dst);
  }
}

}  // namespace

void write_nifti(const std::string& path, const Volume& volume, NiftiWriteOptions options) {
  const torch::Tensor& data = volume.data;
  TANDEM_CHECK(data.defined() && data.dim() == 3,
               "write_nifti '{}': data must be a 3D tensor [Z,Y,X], got {} dims.", path,
               data.defined() ? data.dim() : 0);
  for (int d = 0; d < 3; ++d)
    TANDEM_CHECK(data.size(d) >= 1 && data.size(d) <= std::numeric_limits<int16_t>::max(),
                 "write_nifti '{}': size {} of dim {} is outside 1..32767.", path, data.size(d), d);
  const auto code = static_cast<int16_t>(options.type);
  const int width = nf::element_bytes(code);
  TANDEM_CHECK(width > 0, "write_nifti '{}': datatype code {} is not supported.", path, code);
  const bool swap = options.big_endian;

  torch::Tensor values = data.to(torch::kFloat64).contiguous().cpu();
  if (options.scl_slope != 0.0f)
    values = (values - double{options.scl_inter}) / double{options.scl_slope};
  const int64_t count = values.numel();

  std::vector<uint8_t> bytes(nf::kMinVoxOffset + count * width, 0);
  uint8_t* h = bytes.data();
  nf::store<int32_t>(h, nf::kSizeofHdr, nf::kHeaderSize, swap);
  const int16_t dim[8] = {3,
                          static_cast<int16_t>(data.size(2)),
                          static_cast<int16_t>(data.size(1)),
                          static_cast<int16_t>(data.size(0)),
                          1,
                          1,
                          1,
                          1};
  for (int d = 0; d < 8; ++d) nf::store<int16_t>(h, nf::kDim + 2 * d, dim[d], swap);
  nf::store<int16_t>(h, nf::kDatatype, code, swap);
  nf::store<int16_t>(h, nf::kBitpix, static_cast<int16_t>(8 * width), swap);
  // pixdim[0] is qfac (1); pixdim[1..3] = dx, dy, dz = spacing[2], spacing[1], spacing[0].
  const float pixdim[4] = {1.0f, volume.spacing[2], volume.spacing[1], volume.spacing[0]};
  for (int d = 0; d < 4; ++d) nf::store<float>(h, nf::kPixdim + 4 * d, pixdim[d], swap);
  nf::store<float>(h, nf::kVoxOffset, static_cast<float>(nf::kMinVoxOffset), swap);
  nf::store<float>(h, nf::kSclSlope, options.scl_slope, swap);
  nf::store<float>(h, nf::kSclInter, options.scl_inter, swap);
  h[nf::kXyztUnits] = 2;  // NIFTI_UNITS_MM
  // A diagonal sform (code 2, aligned) so viewers show the voxel sizes.
  nf::store<int16_t>(h, nf::kSformCode, 2, swap);
  for (int r = 0; r < 3; ++r) nf::store<float>(h, nf::kSrowX + 16 * r + 4 * r, pixdim[r + 1], swap);
  std::memcpy(h + nf::kMagic, "n+1", 4);

  store_any(path, options.type, values.data_ptr<double>(), count, swap, h + nf::kMinVoxOffset);
  write_file_bytes(path, bytes, ends_with(path, ".gz"));
}

}  // namespace tandem::data
