#include "trace/tfrecord.h"

#include <gtest/gtest.h>

#include <string>

#include "tandem/common/check.h"
#include "trace/crc32c.h"

namespace tandem::trace {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += digits[c >> 4], out += digits[c & 15];
  return out;
}

// Every TensorBoard event file starts with a 24-byte file_version event; its header,
// length 24 and the masked CRC of that length, is the well-known 18000000 00000000 a37f4b22.
TEST(TfRecord, HeaderOfA24ByteRecord) {
  const std::string record = frame_record(std::string(24, 'x'));
  EXPECT_EQ(hex(record.substr(0, 12)), "1800000000000000a37f4b22");
  EXPECT_EQ(record.size(), 12u + 24u + 4u);
}

TEST(TfRecord, FooterIsMaskedCrcOfData) {
  const std::string record = frame_record("123456789");
  const uint32_t masked = mask_crc(0xE3069283u);
  std::string footer;
  for (int i = 0; i < 4; ++i) footer += char((masked >> (8 * i)) & 0xFF);
  EXPECT_EQ(record.substr(12 + 9), footer);
}

TEST(TfRecord, ParsesBackInOrder) {
  const std::string bytes = frame_record("first") + frame_record("") + frame_record("third");
  EXPECT_EQ(parse_records(bytes), (std::vector<std::string>{"first", "", "third"}));
}

TEST(TfRecord, DetectsEveryCorruptByte) {
  const std::string good = frame_record("hello") + frame_record("world");
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    EXPECT_THROW(parse_records(bad), Error) << "flipped byte " << i;
  }
}

TEST(TfRecord, DetectsTruncation) {
  const std::string good = frame_record("hello");
  for (std::size_t n = 1; n < good.size(); ++n)
    EXPECT_THROW(parse_records(good.substr(0, n)), Error) << "kept " << n << " bytes";
}

TEST(TfRecord, ErrorNamesSourceAndOffset) {
  std::string bad = frame_record("ok") + frame_record("hello");
  bad[18 + 12] ^= 0x40;  // first data byte of the second record, which starts at byte 18
  try {
    parse_records(bad, "run/events");
    FAIL() << "expected tandem::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run/events: record at byte 18 has corrupt data"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::trace
