// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) as used by TFRecord framing.
// Not zlib's crc32, which uses another polynomial.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tandem::trace {

// CRC-32C of data[0, n), continuing from the CRC `crc` of preceding bytes (0 to start):
// crc32c(b, crc32c(a)) == crc32c(a + b). (No default for `crc` here, so that
// crc32c("text", crc) cannot pick this overload with `crc` as a length.)
uint32_t crc32c(const void* data, std::size_t n, uint32_t crc);
inline uint32_t crc32c(std::string_view bytes, uint32_t crc = 0) {
  return crc32c(bytes.data(), bytes.size(), crc);
}

// TFRecord stores CRCs masked, because a CRC of data that itself contains CRCs is weak:
// rotate right by 15 bits and add a constant.
inline uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask_crc(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace tandem::trace
