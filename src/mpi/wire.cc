#include "mpi/wire.h"

#include <cstring>

#include "bytes.h"
#include "tandem/common/check.h"

namespace tandem::mpi {

namespace {

constexpr uint32_t kMagic = 0x746e646d;  // "tndm"
constexpr uint32_t kVersion = 2;         // 2: MessageKey::run

// The dtypes a tensor message may carry; a header naming anything else is corrupt.
bool known_dtype(int16_t code) {
  using S = c10::ScalarType;
  // ScalarType is 8 bits wide: a wider code would be cut to one that looks known.
  if (code < 0 || code >= static_cast<int16_t>(S::NumOptions)) return false;
  switch (static_cast<S>(code)) {
    case S::Byte:
    case S::Char:
    case S::Short:
    case S::Int:
    case S::Long:
    case S::Half:
    case S::Float:
    case S::Double:
    case S::ComplexFloat:
    case S::ComplexDouble:
    case S::Bool:
    case S::BFloat16:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::vector<char> encode_header(const WireHeader& h) {
  std::vector<char> out;
  out.reserve(64 + 8 * h.sizes.size() + h.key.tensor.size());
  put<uint32_t>(out, kMagic);
  put<uint32_t>(out, kVersion);
  put<int32_t>(out, h.key.step);
  put<int32_t>(out, h.key.microbatch);
  put<uint8_t>(out, h.key.gradient ? 1 : 0);
  put<int32_t>(out, h.key.from_stage);
  put<int32_t>(out, h.key.to_stage);
  put<int64_t>(out, h.key.run);
  put<int16_t>(out, static_cast<int16_t>(h.dtype));
  put<int32_t>(out, static_cast<int32_t>(h.sizes.size()));
  for (int64_t s : h.sizes) put<int64_t>(out, s);
  put<int64_t>(out, h.nbytes);
  put<uint32_t>(out, static_cast<uint32_t>(h.key.tensor.size()));
  out.insert(out.end(), h.key.tensor.begin(), h.key.tensor.end());
  return out;
}

WireHeader decode_header(const char* data, size_t size) {
  ByteReader r(data, size, "a tensor message header");
  uint32_t magic = r.get<uint32_t>();
  uint32_t version = r.get<uint32_t>();
  TANDEM_CHECK(magic == kMagic && version == kVersion,
               "a message on tandem's header tag is not a tandem header of version {} (magic "
               "{:#x}, version {}); are all ranks running the same build?",
               kVersion, magic, version);
  WireHeader h;
  h.key.step = r.get<int32_t>();
  h.key.microbatch = r.get<int32_t>();
  const uint8_t gradient = r.get<uint8_t>();
  TANDEM_CHECK(gradient <= 1, "a tensor message header has gradient flag {}, not 0 or 1", gradient);
  h.key.gradient = gradient == 1;
  h.key.from_stage = r.get<int32_t>();
  h.key.to_stage = r.get<int32_t>();
  h.key.run = r.get<int64_t>();
  const int16_t dtype = r.get<int16_t>();
  TANDEM_CHECK(known_dtype(dtype),
               "a tensor message header has dtype code {}, which is no dtype "
               "a tensor message carries",
               dtype);
  h.dtype = static_cast<c10::ScalarType>(dtype);
  int32_t ndim = r.get<int32_t>();
  TANDEM_CHECK(ndim >= 0 && ndim <= 64, "a tensor message header has {} dimensions", ndim);
  h.sizes.resize(ndim);
  // The receiver allocates sizes x dtype and receives nbytes into it: they must agree, and
  // neither may overflow.
  int64_t expect = static_cast<int64_t>(c10::elementSize(h.dtype));
  for (auto& s : h.sizes) {
    s = r.get<int64_t>();
    TANDEM_CHECK(s >= 0, "a tensor message header has a negative size {}", s);
    TANDEM_CHECK(!__builtin_mul_overflow(expect, s, &expect),
                 "a tensor message header announces more bytes than 2^63");
  }
  h.nbytes = r.get<int64_t>();
  TANDEM_CHECK(h.nbytes == expect,
               "a tensor message header announces {} bytes for shape [{}] of {}, which is {} bytes",
               h.nbytes, fmt::join(h.sizes, ", "), c10::toString(h.dtype), expect);
  h.key.tensor = r.get_string(r.get<uint32_t>());
  TANDEM_CHECK(r.done(), "a tensor message header of {} bytes has trailing bytes", size);
  return h;
}

int64_t chunk_count(int64_t nbytes) { return (nbytes + kMaxChunkBytes - 1) / kMaxChunkBytes; }

int chunk_bytes(int64_t nbytes, int64_t index) {
  return static_cast<int>(std::min(kMaxChunkBytes, nbytes - index * kMaxChunkBytes));
}

MPI_Datatype mpi_sum_type(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float:
      return MPI_FLOAT;
    case c10::ScalarType::Double:
      return MPI_DOUBLE;
    case c10::ScalarType::Long:
      return MPI_INT64_T;
    case c10::ScalarType::Int:
      return MPI_INT32_T;
    case c10::ScalarType::Short:
      return MPI_INT16_T;
    case c10::ScalarType::Char:
      return MPI_INT8_T;
    case c10::ScalarType::Byte:
      return MPI_UINT8_T;
    default:
      return MPI_DATATYPE_NULL;
  }
}

}  // namespace tandem::mpi
