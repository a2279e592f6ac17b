#include "trace/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem::trace {
namespace {

TEST(Crc32c, CheckValue) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
}

// The iSCSI test vectors of RFC 3720, appendix B.4.
TEST(Crc32c, Rfc3720Vectors) {
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) up[i] = char(i), down[i] = char(31 - i);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
}

TEST(Crc32c, ExtendsAcrossPieces) { EXPECT_EQ(crc32c("6789", crc32c("12345")), 0xE3069283u); }

TEST(Crc32c, MaskRoundTripsAndChangesTheValue) {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu}) {
    EXPECT_NE(mask_crc(crc), crc);
    EXPECT_EQ(unmask_crc(mask_crc(crc)), crc);
  }
  EXPECT_EQ(mask_crc(0), 0xa282ead8u);
}

}  // namespace
}  // namespace tandem::trace
