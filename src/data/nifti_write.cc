#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "common/output_path.h"
#include "nifti_lib.h"
#include "tandem/common/check.h"
#include "tandem/data/nifti.h"

namespace tandem::data {
namespace {

// Stores `n` values as T: integers round to nearest and must fit the type.
template <typename T>
void store_all(const std::string& path, const double* values, int64_t n, void* dst) {
  T* out = static_cast<T*>(dst);
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
    out[i] = static_cast<T>(v);
  }
}

void store_any(const std::string& path, NiftiType type, const double* v, int64_t n, void* dst) {
  switch (type) {
    case NiftiType::kUInt8:
      return store_all<uint8_t>(path, v, n, dst);
    case NiftiType::kInt8:
      return store_all<int8_t>(path, v, n, dst);
    case NiftiType::kInt16:
      return store_all<int16_t>(path, v, n, dst);
    case NiftiType::kUInt16:
      return store_all<uint16_t>(path, v, n, dst);
    case NiftiType::kInt32:
      return store_all<int32_t>(path, v, n, dst);
    case NiftiType::kUInt32:
      return store_all<uint32_t>(path, v, n, dst);
    case NiftiType::kInt64:
      return store_all<int64_t>(path, v, n, dst);
    case NiftiType::kUInt64:
      return store_all<uint64_t>(path, v, n, dst);
    case NiftiType::kFloat32:
      return store_all<float>(path, v, n, dst);
    case NiftiType::kFloat64:
      return store_all<double>(path, v, n, dst);
  }
  TANDEM_CHECK(false, "write_nifti '{}': datatype code {} is not one of NiftiType's.", path,
               static_cast<int>(type));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Writes `image` as `path` through tandem's output writer (common/output_path.h): nifticlib
// writes a temporary file of the same ending (it picks the compression by it), which replaces
// `path` once whole. Needs nifti_lib's lock held.
void write_nifti_image(const std::string& path, nifti_image* image) {
  const std::string ending = ends_with(path, ".nii.gz") ? ".nii.gz" : ".nii";
  write_output_file_by(path, ending, [&](const std::string& temporary) {
    TANDEM_CHECK(nifti_set_filenames(image, temporary.c_str(), /*check=*/0, /*byte_order=*/1) == 0,
                 "{}: nifticlib does not accept the name", path);
    nifti_image_write(image);
    // nifti_image_write reports nothing: read the header back to know the file is whole.
    nifti_lib::Image back(nifti_image_read(temporary.c_str(), /*read_data=*/0));
    TANDEM_CHECK(back != nullptr, "could not write {}: nifticlib could not write the file", path);
  });
}

}  // namespace

void write_nifti(const std::string& path, const Volume& volume, NiftiWriteOptions options) {
  const torch::Tensor& data = volume.data;
  TANDEM_CHECK(data.defined() && (data.dim() == 3 || data.dim() == 4),
               "write_nifti '{}': data must be [Z,Y,X] or [C,Z,Y,X], got {} dims.", path,
               data.defined() ? data.dim() : 0);
  TANDEM_CHECK(ends_with(path, ".nii") || ends_with(path, ".nii.gz"),
               "write_nifti '{}': the name must end in .nii or .nii.gz.", path);
  const torch::Tensor cdata = data.dim() == 3 ? data.unsqueeze(0) : data;
  const int64_t channels = cdata.size(0);
  const int64_t dims[8] = {
      channels > 1 ? 4 : 3, cdata.size(3), cdata.size(2), cdata.size(1), channels, 1, 1, 1};
  torch::Tensor values = cdata.to(torch::kFloat64).contiguous().cpu();
  if (options.scl_slope != 0.0f)
    values = (values - double{options.scl_inter}) / double{options.scl_slope};

  auto held = nifti_lib::lock();
  nifti_lib::Image image(nifti_make_new_nim(dims, static_cast<int>(options.type), /*fill=*/1));
  TANDEM_CHECK(image != nullptr, "write_nifti '{}': nifticlib refused dims [{}] or datatype {}.",
               path, fmt::join(dims, ", "), static_cast<int>(options.type));
  store_any(path, options.type, values.data_ptr<double>(), values.numel(), image->data);
  image->scl_slope = options.scl_slope;
  image->scl_inter = options.scl_inter;
  // pixdim[1..3] = dx, dy, dz = spacing[2], spacing[1], spacing[0], and a diagonal sform
  // (code 2, aligned) from them so that viewers show the voxel sizes.
  const double size[3] = {volume.spacing[2], volume.spacing[1], volume.spacing[0]};
  image->dx = image->pixdim[1] = size[0];
  image->dy = image->pixdim[2] = size[1];
  image->dz = image->pixdim[3] = size[2];
  image->xyz_units = NIFTI_UNITS_MM;
  image->sform_code = NIFTI_XFORM_ALIGNED_ANAT;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) image->sto_xyz.m[r][c] = r == c ? (r < 3 ? size[r] : 1.0) : 0.0;
  // NIfTI-1: this nifticlib (3.0.1) writes no header at all when nifti_type says NIfTI-2.
  image->nifti_type = NIFTI_FTYPE_NIFTI1_1;
  write_nifti_image(path, image.get());
}

void write_nifti_like(const std::string& path, const std::string& like, const torch::Tensor& data,
                      NiftiType type) {
  TANDEM_CHECK(ends_with(path, ".nii") || ends_with(path, ".nii.gz"),
               "{}: the name of a NIfTI output must end in .nii or .nii.gz", path);
  TANDEM_CHECK(data.defined() && (data.dim() == 3 || data.dim() == 4),
               "{}: the data must be [Z,Y,X] or [C,Z,Y,X], not {} dims", path,
               data.defined() ? data.dim() : 0);
  const torch::Tensor cdata = data.dim() == 3 ? data.unsqueeze(0) : data;
  const int64_t channels = cdata.size(0);
  const torch::Tensor values = cdata.to(torch::kFloat64).contiguous().cpu();
  auto held = nifti_lib::lock();
  nifti_lib::Image grid(nifti_image_read(like.c_str(), /*read_data=*/0));
  TANDEM_CHECK(grid != nullptr, "{}: nifticlib cannot read its header again", like);
  TANDEM_CHECK(grid->nx == cdata.size(3) && grid->ny == cdata.size(2) && grid->nz == cdata.size(1),
               "{}: the result has [{}] voxels (z,y,x) but {} has [{},{},{}]", path,
               fmt::join(cdata.sizes().slice(1), ","), like, grid->nz, grid->ny, grid->nx);
  // nifticlib's own copy of the header (geometry, units, description), with new data.
  nifti_lib::Image image(nifti_copy_nim_info(grid.get()));
  TANDEM_CHECK(image != nullptr, "{}: nifticlib cannot copy the header of {}", path, like);
  for (int i = 5; i < 8; ++i) image->dim[i] = 1;
  image->dim[0] = channels > 1 ? 4 : 3;
  image->dim[4] = static_cast<int64_t>(channels);
  image->datatype = static_cast<int>(type);
  nifti_datatype_sizes(image->datatype, &image->nbyper, &image->swapsize);
  nifti_update_dims_from_array(image.get());
  image->scl_slope = 0;
  image->scl_inter = 0;
  image->cal_min = image->cal_max = 0;
  image->intent_code = 0;
  image->nifti_type = NIFTI_FTYPE_NIFTI1_1;  // see write_nifti
  image->data = std::calloc(static_cast<size_t>(image->nvox), static_cast<size_t>(image->nbyper));
  TANDEM_CHECK(image->data != nullptr, "{}: no memory for {} voxels", path, image->nvox);
  store_any(path, type, values.data_ptr<double>(), values.numel(), image->data);
  write_nifti_image(path, image.get());
}

}  // namespace tandem::data
