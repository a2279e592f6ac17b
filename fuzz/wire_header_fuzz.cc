// The header of a tensor message between MPI ranks (src/mpi/wire.cc), as the progress thread
// decodes it before allocating the payload's buffer: any bytes either decode into a header the
// receiver can allocate from (a known dtype, sizes whose bytes are its nbytes) and that encodes
// back to the same bytes, or throw tandem::Error.
#include <c10/core/ScalarType.h>

#include <cstring>

#include "mpi/wire.h"
#include "tandem/common/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::mpi;
  WireHeader h;
  try {
    h = decode_header(reinterpret_cast<const char*>(data), size);
  } catch (const tandem::Error&) {
    return 0;
  }
  int64_t numel = 1;
  for (int64_t s : h.sizes) {
    TANDEM_ASSERT(s >= 0, "decoded a negative size {}", s);
    numel *= s;  // decode_header bounded the product
  }
  TANDEM_ASSERT(numel * static_cast<int64_t>(c10::elementSize(h.dtype)) == h.nbytes,
                "decoded {} bytes for {} elements of {}", h.nbytes, numel, c10::toString(h.dtype));
  const std::vector<char> again = encode_header(h);
  TANDEM_ASSERT(again.size() == size && std::memcmp(again.data(), data, size) == 0,
                "a decoded header of {} bytes encodes to {} other bytes", size, again.size());
  return 0;
}
