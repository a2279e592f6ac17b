#include "tandem/data/idx.h"

#include <cstring>
#include <memory>
#include <vector>

#include "data/file_bytes.h"
#include "tandem/common/check.h"

// Element swapping below assumes a little-endian host (x86-64, AArch64).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "IDX reading assumes a little-endian host");

namespace tandem::data {
namespace {

struct TypeInfo {
  torch::ScalarType dtype;
  int bytes;
};

bool type_info(uint8_t code, TypeInfo* info) {
  switch (static_cast<IdxType>(code)) {
    case IdxType::kUInt8:
      *info = {torch::kUInt8, 1};
      return true;
    case IdxType::kInt8:
      *info = {torch::kInt8, 1};
      return true;
    case IdxType::kInt16:
      *info = {torch::kInt16, 2};
      return true;
    case IdxType::kInt32:
      *info = {torch::kInt32, 4};
      return true;
    case IdxType::kFloat32:
      *info = {torch::kFloat32, 4};
      return true;
    case IdxType::kFloat64:
      *info = {torch::kFloat64, 8};
      return true;
  }
  return false;
}

uint8_t code_of(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kUInt8:
      return 0x08;
    case torch::kInt8:
      return 0x09;
    case torch::kInt16:
      return 0x0B;
    case torch::kInt32:
      return 0x0C;
    case torch::kFloat32:
      return 0x0D;
    case torch::kFloat64:
      return 0x0E;
    default:
      break;
  }
  TANDEM_CHECK(false,
               "write_idx: dtype {} has no IDX type code; use uint8, int8, int16, int32, "
               "float32 or float64.",
               c10::toString(dtype));
  return 0;
}

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reverses each `width`-byte element in place (IDX is big-endian, the host little-endian).
void swap_elements(uint8_t* p, int64_t count, int width) {
  if (width == 1) return;
  for (int64_t i = 0; i < count; ++i, p += width)
    for (int a = 0, b = width - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

}  // namespace

IdxHeader read_idx_header(const std::string& path) {
  // 4 bytes of magic and at most 255 dimensions of 4 bytes.
  const std::vector<uint8_t> bytes = read_file_prefix(path, 4 + 4 * 255);
  TANDEM_CHECK(bytes.size() >= 4 && bytes[0] == 0 && bytes[1] == 0 && bytes[3] >= 1,
               "'{}' is not an IDX file: it does not start with 00 00, a type code and 1 or more "
               "dimensions.",
               path);
  const int ndim = bytes[3];
  TANDEM_CHECK(bytes.size() >= 4 + 4 * static_cast<size_t>(ndim),
               "'{}' is truncated: its IDX header needs {} bytes for {} dimensions but the file "
               "holds {}.",
               path, 4 + 4 * ndim, ndim, bytes.size());
  IdxHeader h;
  h.type = bytes[2];
  h.dims.resize(ndim);
  for (int d = 0; d < ndim; ++d) h.dims[d] = load_be32(&bytes[4 + 4 * d]);
  return h;
}

std::vector<int64_t> read_idx_dims(const std::string& path) { return read_idx_header(path).dims; }

std::string idx_type_name(uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned bytes (0x08)";
    case 0x09:
      return "signed bytes (0x09)";
    case 0x0B:
      return "16-bit integers (0x0b)";
    case 0x0C:
      return "32-bit integers (0x0c)";
    case 0x0D:
      return "32-bit floats (0x0d)";
    case 0x0E:
      return "64-bit floats (0x0e)";
  }
  return fmt::format("an unknown type (0x{:02x})", code);
}

torch::Tensor read_idx(const std::string& path) {
  std::vector<uint8_t> bytes = read_file_bytes(path);
  TANDEM_CHECK(bytes.size() >= 4,
               "'{}' is not an IDX file: it holds {} bytes, fewer than the 4-byte magic.", path,
               bytes.size());
  TANDEM_CHECK(bytes[0] == 0 && bytes[1] == 0 && bytes[3] >= 1,
               "'{}' is not an IDX file: bad magic {:02x} {:02x} {:02x} {:02x} (expected 00 00, "
               "a type code, and 1 or more dimensions).",
               path, bytes[0], bytes[1], bytes[2], bytes[3]);
  TypeInfo info{};
  TANDEM_CHECK(type_info(bytes[2], &info),
               "'{}' has IDX element type code 0x{:02x}, which is not one of 0x08 (ubyte), 0x09 "
               "(byte), 0x0b (short), 0x0c (int), 0x0d (float), 0x0e (double).",
               path, bytes[2]);
  const int ndim = bytes[3];
  const size_t header = 4 + 4 * static_cast<size_t>(ndim);
  TANDEM_CHECK(bytes.size() >= header,
               "'{}' is truncated: its IDX header needs {} bytes for {} dimensions but the file "
               "holds {}.",
               path, header, ndim, bytes.size());
  std::vector<int64_t> dims(ndim);
  int64_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    dims[d] = load_be32(&bytes[4 + 4 * d]);
    // Dimensions whose product overflows describe more data than any file holds.
    TANDEM_CHECK(!__builtin_mul_overflow(count, dims[d], &count) &&
                     count <= static_cast<int64_t>(bytes.size()),
                 "'{}' is truncated: its IDX dims {} need more bytes than the {} the file holds.",
                 path, fmt::join(dims.begin(), dims.begin() + d + 1, "x"), bytes.size());
  }
  const size_t expected = header + static_cast<size_t>(count) * info.bytes;
  TANDEM_CHECK(bytes.size() >= expected,
               "'{}' is truncated: dims {} need {} bytes but the file holds {}. Copy or "
               "download it again.",
               path, dims, expected, bytes.size());
  TANDEM_CHECK(bytes.size() == expected,
               "'{}' has {} bytes after the data for dims {} ({} expected); it is not a valid "
               "IDX file.",
               path, bytes.size() - expected, dims, expected);
  if (info.bytes == 1 && count > 0) {
    // Bytes need no swapping: the tensor keeps the file's buffer, not a copy of it (MNIST's
    // 47 MB of images are not written twice).
    auto held = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
    return torch::from_blob(
        held->data() + header, dims, [held](void*) mutable { held.reset(); },
        torch::TensorOptions().dtype(info.dtype));
  }
  torch::Tensor out = torch::empty(dims, torch::TensorOptions().dtype(info.dtype));
  if (count == 0) return out;  // no data: an empty tensor has no storage to copy into
  auto* dst = static_cast<uint8_t*>(out.data_ptr());
  std::memcpy(dst, bytes.data() + header, expected - header);
  swap_elements(dst, count, info.bytes);
  return out;
}

void write_idx(const std::string& path, const torch::Tensor& array, bool gzip) {
  TANDEM_CHECK(array.dim() >= 1 && array.dim() <= 255,
               "write_idx: an IDX array needs 1 to 255 dimensions, got {}.", array.dim());
  const uint8_t code = code_of(array.scalar_type());
  torch::Tensor a = array.contiguous().cpu();
  std::vector<uint8_t> bytes = {0, 0, code, static_cast<uint8_t>(a.dim())};
  for (int64_t size : a.sizes()) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bytes.push_back(static_cast<uint8_t>(size >> shift));
  }
  const size_t header = bytes.size();
  const size_t data_bytes = a.numel() * a.element_size();
  bytes.resize(header + data_bytes);
  std::memcpy(bytes.data() + header, a.data_ptr(), data_bytes);
  swap_elements(bytes.data() + header, a.numel(), static_cast<int>(a.element_size()));
  write_file_bytes(path, bytes, gzip);
}

}  // namespace tandem::data
