// A hand-written reader and writer: see npy.h for why no packaged library fits.
#include "tandem/data/npy.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/ranges.h>

#include "tandem/common/check.h"

// The elements are read as they lie in the file: little-endian, as on the host.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy reading assumes a little-endian host");

namespace tandem::data {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// numpy writes headers of a few hundred bytes; a larger length is a corrupt file, not a reason
// to allocate.
constexpr uint32_t kMaxHeader = 1 << 20;
// Shapes whose bytes would pass this are refused before any multiplication overflows.
constexpr int64_t kMaxBytes = int64_t{1} << 60;

// A cursor over the header's dict literal. Every failure names the file and the byte.
class DictParser {
 public:
  DictParser(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool take(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c) {
    TANDEM_CHECK(take(c), "'{}' has a malformed npy header: expected '{}' at byte {} of {}.",
                 path_, c, pos_, quoted());
  }
  std::string string_literal() {
    skip_space();
    TANDEM_CHECK(pos_ < text_.size() && (text_[pos_] == '\'' || text_[pos_] == '"'),
                 "'{}' has a malformed npy header: expected a quoted string at byte {} of {}.",
                 path_, pos_, quoted());
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    TANDEM_CHECK(end != std::string::npos,
                 "'{}' has a malformed npy header: a string is not closed in {}.", path_,
                 quoted());
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    if (text_.compare(pos_, 4, "True") == 0) return pos_ += 4, true;
    if (text_.compare(pos_, 5, "False") == 0) return pos_ += 5, false;
    TANDEM_CHECK(false, "'{}' has a malformed npy header: expected True or False at byte {} of {}.",
                 path_, pos_, quoted());
  }
  std::vector<int64_t> int_tuple() {
    expect('(');
    std::vector<int64_t> values;
    while (!take(')')) {
      skip_space();
      size_t digits = 0;
      int64_t v = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        TANDEM_CHECK(v <= (int64_t{1} << 50), "'{}' has a dimension too large in {}.", path_,
                     quoted());
        v = v * 10 + (text_[pos_++] - '0');
        ++digits;
      }
      TANDEM_CHECK(digits > 0,
                   "'{}' has a malformed npy header: expected a dimension (a whole number >= 0) "
                   "at byte {} of {}.",
                   path_, pos_, quoted());
      values.push_back(v);
      if (!take(',')) {
        expect(')');
        break;
      }
    }
    return values;
  }
  std::string quoted() const { return fmt::format("the header {:?}", text_); }

 private:
  const std::string& path_;
  const std::string& text_;
  size_t pos_ = 0;
};

struct Dtype {
  const char* descr;
  torch::ScalarType type;
};
constexpr Dtype kDtypes[] = {{"<f4", torch::kFloat32},
                             {"<f8", torch::kFloat64},
                             {"|u1", torch::kUInt8},
                             {"<u1", torch::kUInt8},
                             {"<i8", torch::kInt64}};

int64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

NpyHeader parse(const std::string& path, std::FILE* f) {
  unsigned char lead[12] = {};
  const size_t got = std::fread(lead, 1, sizeof(lead), f);
  TANDEM_CHECK(got >= 10 && std::memcmp(lead, kMagic, kMagicSize) == 0,
               "'{}' is not a NumPy .npy file: it does not start with the bytes \\x93NUMPY (save "
               "arrays with numpy.save).",
               path);
  const int major = lead[6], minor = lead[7];
  TANDEM_CHECK((major == 1 || major == 2 || major == 3) && minor == 0,
               "'{}' is npy format version {}.{}; tandem reads 1.0, 2.0 and 3.0.", path, major,
               minor);
  // Lengths are little-endian: 2 bytes in version 1.0, 4 from 2.0 on.
  const bool wide = major >= 2;
  const uint32_t header_len =
      wide ? uint32_t(lead[8]) | uint32_t(lead[9]) << 8 | uint32_t(lead[10]) << 16 |
                 uint32_t(lead[11]) << 24
           : uint32_t(lead[8]) | uint32_t(lead[9]) << 8;
  const int64_t offset = (wide ? 12 : 10) + int64_t{header_len};
  const int64_t size = file_size(path);
  TANDEM_CHECK(header_len <= kMaxHeader && offset <= size,
               "'{}' is truncated or corrupt: its npy header claims {} bytes, and the file holds "
               "{} in all.",
               path, header_len, size);
  std::string text(header_len, '\0');
  std::fseek(f, wide ? 12 : 10, SEEK_SET);
  TANDEM_CHECK(std::fread(text.data(), 1, header_len, f) == header_len,
               "error while reading '{}': {}.", path, std::strerror(errno));

  NpyHeader h;
  h.data_offset = offset;
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  DictParser p(path, text);
  p.expect('{');
  while (!p.take('}')) {
    const std::string key = p.string_literal();
    p.expect(':');
    if (key == "descr") {
      h.descr = p.string_literal();
      have_descr = true;
    } else if (key == "fortran_order") {
      fortran = p.boolean();
      have_order = true;
    } else if (key == "shape") {
      h.shape = p.int_tuple();
      have_shape = true;
    } else {
      TANDEM_CHECK(false, "'{}' has an npy header with the unknown key '{}' in {}.", path, key,
                   p.quoted());
    }
    if (!p.take(',')) {
      p.expect('}');
      break;
    }
  }
  TANDEM_CHECK(have_descr && have_order && have_shape,
               "'{}' has an npy header without {} in {}.", path,
               !have_descr ? "'descr'" : !have_order ? "'fortran_order'" : "'shape'", p.quoted());

  const Dtype* dtype = nullptr;
  for (const Dtype& d : kDtypes)
    if (h.descr == d.descr) dtype = &d;
  TANDEM_CHECK(dtype != nullptr,
               "'{}' holds dtype '{}'; tandem reads float32 ('<f4'), float64 ('<f8'), uint8 "
               "('|u1') and int64 ('<i8'), little-endian. Convert it, e.g. "
               "numpy.save(path, a.astype('<f4')).",
               path, h.descr);
  h.dtype = dtype->type;
  TANDEM_CHECK(!fortran || h.shape.size() <= 1,
               "'{}' is in Fortran (column-major) order; tandem reads C order. Save it with "
               "numpy.save(path, numpy.ascontiguousarray(a)).",
               path);

  const int64_t width = static_cast<int64_t>(c10::elementSize(h.dtype));
  int64_t elements = 1;
  for (int64_t d : h.shape) {
    TANDEM_CHECK(d == 0 || elements <= kMaxBytes / width / d,
                 "'{}' has shape {}, more elements than any file holds.", path,
                 npy_shape_text(h.shape));
    elements *= d;
  }
  const int64_t need = offset + elements * width;
  TANDEM_CHECK(size == need,
               "'{}' holds {} bytes, but its header ({} bytes) and shape {} of '{}' ({}-byte "
               "elements) need {}: the file is {}. Save it again.",
               path, size, offset, npy_shape_text(h.shape), h.descr, width, need,
               size < need ? "truncated" : "longer than its array");
  return h;
}

File open(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  TANDEM_CHECK(f != nullptr, "cannot open '{}': {}.", path, std::strerror(errno));
  return f;
}

}  // namespace

std::string npy_shape_text(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

NpyHeader read_npy_header(const std::string& path) {
  File f = open(path);
  return parse(path, f.get());
}

torch::Tensor read_npy(const std::string& path) {
  File f = open(path);
  const NpyHeader h = parse(path, f.get());
  torch::Tensor out = torch::empty(h.shape, h.dtype);
  const size_t bytes = out.numel() * out.element_size();
  std::fseek(f.get(), static_cast<long>(h.data_offset), SEEK_SET);
  TANDEM_CHECK(std::fread(out.data_ptr(), 1, bytes, f.get()) == bytes,
               "error while reading '{}' ({} bytes of elements expected): {}.", path, bytes,
               std::strerror(errno));
  return out;
}

std::string npy_bytes(const torch::Tensor& array) {
  const torch::Tensor a = array.contiguous().cpu();
  std::string descr;
  switch (a.scalar_type()) {
    case torch::kFloat32: descr = "<f4"; break;
    case torch::kFloat64: descr = "<f8"; break;
    case torch::kUInt8: descr = "|u1"; break;
    case torch::kInt64: descr = "<i8"; break;
    default:
      TANDEM_CHECK(false, "a .npy file is written from float32, float64, uint8 or int64, not {}",
                   c10::toString(a.scalar_type()));
  }
  std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end());
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   descr, npy_shape_text(shape));
  // Magic (6), version (2), length (2), then the header padded with spaces to a multiple of 64
  // bytes and ended by a newline.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(static_cast<const char*>(a.data_ptr()), a.numel() * a.element_size());
  return out;
}

}  // namespace tandem::data
