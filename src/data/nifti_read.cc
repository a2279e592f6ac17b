#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "data/file_bytes.h"
#include "nifti_lib.h"
#include "tandem/common/check.h"
#include "tandem/data/nifti.h"

namespace tandem::data {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What nifticlib cannot say for itself (it returns NULL or -1, no reason): the file exists, and
// a gzip file is named .gz (nifticlib decides by the name, and would parse compressed bytes).
void check_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  TANDEM_CHECK(f != nullptr, "cannot open '{}': {}.", path, std::strerror(errno));
  std::fclose(f);
  TANDEM_CHECK(!is_gzip_file(path) || ends_with(path, ".gz"),
               "'{}' is gzip-compressed but its name does not end in .gz, and nifticlib reads a "
               "file by its name: rename it to '{}.gz'.",
               path, path);
}

// Why nifticlib rejected the header of `path`, from its raw fields.
std::string header_problem(const std::string& path) {
  const std::vector<uint8_t> head = read_file_prefix(path, sizeof(nifti_2_header));
  int version = -1;
  void* raw = nifti_read_header(path.c_str(), &version, /*check=*/0);
  if (raw == nullptr) {
    int32_t sizeof_hdr = 0;
    if (head.size() >= 4) std::memcpy(&sizeof_hdr, head.data(), 4);
    return fmt::format(
        "it is not a NIfTI file: it holds {} (decompressed) bytes and its first field, "
        "sizeof_hdr, reads {} where a NIfTI-1 header has 348 and a NIfTI-2 header 540",
        head.size(), sizeof_hdr);
  }
  std::vector<int64_t> dim;
  int datatype = 0;
  std::string magic;
  if (version == 2) {
    const auto* h = static_cast<nifti_2_header*>(raw);
    dim.assign(h->dim, h->dim + 8);
    datatype = h->datatype;
    magic.assign(h->magic, strnlen(h->magic, 4));
  } else {
    const auto* h = static_cast<nifti_1_header*>(raw);
    dim.assign(h->dim, h->dim + 8);
    datatype = h->datatype;
    magic.assign(h->magic, strnlen(h->magic, 4));
  }
  std::free(raw);
  return fmt::format(
      "its NIfTI-{} header has dim [{}], datatype {} ({}) and magic \"{}\"; nifticlib needs "
      "dim[0] in 1..7, dim[1..dim[0]] >= 1 and a known datatype",
      version == 2 ? 2 : 1, fmt::join(dim, ", "), datatype, nifti_datatype_string(datatype), magic);
}

// The header of `path`, checked; its voxels are not read. Call with the lock held.
nifti_lib::Image read_header(const std::string& path) {
  check_file(path);
  nifti_lib::Image image(nifti_image_read(path.c_str(), /*read_data=*/0));
  TANDEM_CHECK(image != nullptr, "'{}' has a header that nifticlib cannot read: {}.", path,
               header_problem(path));
  const int dt = image->datatype;
  const bool complex = dt == DT_COMPLEX64 || dt == DT_COMPLEX128 || dt == DT_COMPLEX256;
  TANDEM_CHECK(!complex,
               "'{}' holds complex voxels ({}); tandem reads real values. Save the magnitude "
               "(or the real and imaginary parts as two volumes of a 4D file) instead.",
               path, nifti_datatype_string(dt));
  TANDEM_CHECK(dt != DT_BINARY && image->nbyper > 0,
               "'{}' has datatype {} ({}), which tandem does not read; real integer and float "
               "types (DT_UINT8 to DT_FLOAT128), DT_RGB24 and DT_RGBA32 are read.",
               path, dt, nifti_datatype_string(dt));
  return image;
}

// Colour channels per voxel: 3 for RGB24, 4 for RGBA32, else 1.
int64_t colours(int datatype) { return datatype == DT_RGB24 ? 3 : datatype == DT_RGBA32 ? 4 : 1; }

// [C,Z,Y,X]: dims beyond the third (and the colours of RGB) are channels.
std::array<int64_t, 4> shape_of(const nifti_image& image) {
  const int64_t rank = image.dim[0];
  auto dim = [&](int d) { return d <= rank ? image.dim[d] : int64_t{1}; };
  int64_t channels = colours(image.datatype);
  for (int d = 4; d <= 7; ++d) channels *= dim(d);
  return {channels, dim(3), dim(2), dim(1)};
}

// Refuses dimensions whose product overflows (nifticlib's voxel count then wraps around).
void check_dimensions(const nifti_image& image, const std::string& path) {
  int64_t elements = 1;
  bool overflow = false;
  for (int64_t n : shape_of(image)) overflow |= __builtin_mul_overflow(elements, n, &elements);
  TANDEM_CHECK(
      !overflow && elements == image.nvox * colours(image.datatype),
      "'{}' has dimensions [{}] whose product does not fit in 64 bits: its header is "
      "damaged.",
      path,
      fmt::join(image.dim + 1, image.dim + 1 + std::clamp<int64_t>(image.dim[0], 0, 7), ", "));
}

// Converts `n` stored values of type T to float, scaling when slope != 0. Double arithmetic
// keeps integer values up to 2^53 exact before the one rounding to float.
template <typename T>
void convert(const void* src, int64_t n, double slope, double inter, float* dst) {
  const T* in = static_cast<const T*>(src);
  if (slope == 0.0) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<double>(in[i]));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    dst[i] = static_cast<float>(static_cast<double>(in[i]) * slope + inter);
}

// The voxels of a loaded image as float32 [C,Z,Y,X].
torch::Tensor voxels(const nifti_image& image) {
  const std::array<int64_t, 4> shape = shape_of(image);
  torch::Tensor out = torch::empty({shape[0], shape[1], shape[2], shape[3]}, torch::kFloat32);
  float* dst = out.data_ptr<float>();
  const int64_t n = out.numel();
  // nifticlib has replaced a non-finite slope or intercept by 0 (no scaling).
  const double slope = image.scl_slope, inter = image.scl_inter;
  const void* in = image.data;
  switch (image.datatype) {
    case DT_UINT8:
      convert<uint8_t>(in, n, slope, inter, dst);
      break;
    case DT_INT8:
      convert<int8_t>(in, n, slope, inter, dst);
      break;
    case DT_INT16:
      convert<int16_t>(in, n, slope, inter, dst);
      break;
    case DT_UINT16:
      convert<uint16_t>(in, n, slope, inter, dst);
      break;
    case DT_INT32:
      convert<int32_t>(in, n, slope, inter, dst);
      break;
    case DT_UINT32:
      convert<uint32_t>(in, n, slope, inter, dst);
      break;
    case DT_INT64:
      convert<int64_t>(in, n, slope, inter, dst);
      break;
    case DT_UINT64:
      convert<uint64_t>(in, n, slope, inter, dst);
      break;
    case DT_FLOAT32:
      convert<float>(in, n, slope, inter, dst);
      break;
    case DT_FLOAT64:
      convert<double>(in, n, slope, inter, dst);
      break;
    case DT_FLOAT128:
      convert<long double>(in, n, slope, inter, dst);
      break;
    case DT_RGB24:
    case DT_RGBA32: {
      // Stored [volume][voxel][colour] bytes; nifti1.h: no scaling for colours.
      const int64_t k = colours(image.datatype);
      torch::Tensor bytes = torch::from_blob(
          image.data, {shape[0] / k, shape[1] * shape[2] * shape[3], k}, torch::kUInt8);
      out.view({shape[0] / k, k, -1}).copy_(bytes.permute({0, 2, 1}));
      break;
    }
    default:
      TANDEM_ASSERT(false, "datatype {} passed read_header's checks", image.datatype);
  }
  return out;
}

int64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// Deflate shrinks data at most 1032 to 1: a .gz file cannot hold more than this many times
// its own size.
constexpr int64_t kMaxDeflateRatio = 1032;

// Where the voxels of `image` (read from `path`) are.
std::string data_file_of(const nifti_image& image, const std::string& path) {
  return image.iname ? image.iname : path;
}

[[noreturn]] void fail_truncated(const nifti_image& image, const std::string& path,
                                 const std::string& held) {
  const int64_t declared = image.nvox > 0 && image.nvox <= INT64_MAX / image.nbyper
                               ? image.iname_offset + image.nvox * image.nbyper
                               : -1;
  throw Error(fmt::format(
      "'{}' is truncated: its header asks for {} voxels of {} bytes from byte {} ({} in all), "
      "but '{}' holds {}. Copy it again.",
      path, image.nvox, image.nbyper, image.iname_offset,
      declared >= 0 ? fmt::format("{} bytes", declared) : "more than 2^63 bytes",
      data_file_of(image, path), held));
}

// Refuses a header that declares more voxel bytes than its data file can hold, before
// nifticlib allocates them: a damaged or hostile header may declare terabytes. A .gz file is
// only bounded here; nifti_image_load finds one that is cut short.
void check_declared_size(const nifti_image& image, const std::string& path) {
  const std::string data_file = data_file_of(image, path);
  const bool gz = ends_with(data_file, ".gz");
  const int64_t size = file_size(data_file);
  TANDEM_CHECK(size >= 0, "cannot read the voxels of '{}': '{}' is missing ({}).", path, data_file,
               std::strerror(errno));
  const int64_t room = gz ? size * kMaxDeflateRatio : size;
  const int64_t offset = std::max<int64_t>(image.iname_offset, 0);
  const bool fits = image.nvox >= 0 && image.nbyper > 0 && offset <= room &&
                    image.nvox <= (room - offset) / image.nbyper;
  if (fits) return;
  fail_truncated(image, path,
                 gz ? fmt::format("{} compressed bytes, at most {} decompressed", size, room)
                    : fmt::format("{} bytes", size));
}

}  // namespace

std::array<int64_t, 4> read_nifti_shape(const std::string& path) {
  auto held = nifti_lib::lock();
  nifti_lib::Image image = read_header(path);
  check_dimensions(*image, path);
  return shape_of(*image);
}

Volume read_nifti(const std::string& path) {
  auto held = nifti_lib::lock();
  nifti_lib::Image image = read_header(path);
  check_dimensions(*image, path);
  check_declared_size(*image, path);
  if (nifti_image_load(image.get()) != 0) {
    const std::string data_file = data_file_of(*image, path);
    const bool gz = ends_with(data_file, ".gz");
    const int64_t held =
        gz ? static_cast<int64_t>(read_file_bytes(data_file).size()) : file_size(data_file);
    fail_truncated(*image, path, fmt::format("{}{} bytes", held, gz ? " decompressed" : ""));
  }
  Volume out;
  out.data = voxels(*image);
  for (int d = 0; d < 3; ++d) {
    const double p = std::fabs(image->pixdim[3 - d]);
    out.spacing[d] = std::isfinite(p) && p > 0.0 ? static_cast<float>(p) : 1.0f;  // unset: 1
  }
  return out;
}

}  // namespace tandem::data
