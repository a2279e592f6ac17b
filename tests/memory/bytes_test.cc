#include "tandem/memory/bytes.h"

#include <gtest/gtest.h>

#include <string>

#include "tandem/common/check.h"

namespace tandem::memory {
namespace {

TEST(ParseBytes, PlainNumberIsBytes) {
  EXPECT_EQ(parse_bytes("1000000"), 1000000u);
  EXPECT_EQ(parse_bytes("0"), 0u);
  EXPECT_EQ(parse_bytes("  42 "), 42u);
  EXPECT_EQ(parse_bytes("7B"), 7u);
}

TEST(ParseBytes, BinaryAndDecimalUnits) {
  EXPECT_EQ(parse_bytes("2GiB"), 2ULL << 30);
  EXPECT_EQ(parse_bytes("512MiB"), 512ULL << 20);
  EXPECT_EQ(parse_bytes("64 KiB"), 64ULL << 10);
  EXPECT_EQ(parse_bytes("1TiB"), 1ULL << 40);
  EXPECT_EQ(parse_bytes("1.5GB"), 1500000000u);
  EXPECT_EQ(parse_bytes("3kb"), 3000u);
  EXPECT_EQ(parse_bytes("2tb"), 2000000000000u);
  EXPECT_EQ(parse_bytes("1mib"), 1ULL << 20);
}

TEST(ParseBytes, FractionsRoundToNearestByte) {
  EXPECT_EQ(parse_bytes("1.5KiB"), 1536u);
  EXPECT_EQ(parse_bytes("0.1KiB"), 102u);  // 102.4
  EXPECT_EQ(parse_bytes("0.0005KB"), 1u);  // 0.5 rounds up
  EXPECT_EQ(parse_bytes("2.25GiB"), (2ULL << 30) + (1ULL << 28));
}

TEST(ParseBytes, LargestValues) {
  EXPECT_EQ(parse_bytes("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_bytes("16777215TiB"), 16777215ULL << 40);
}

// Each bad input throws tandem::Error whose message contains `needle`.
void expect_error(const std::string& text, const std::string& needle) {
  try {
    parse_bytes(text);
    ADD_FAILURE() << "'" << text << "' was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_NE(what.find("'" + text + "'"), std::string::npos) << what;
  }
}

TEST(ParseBytes, BadInputsSayWhatIsWrong) {
  expect_error("", "empty");
  expect_error("   ", "empty");
  expect_error("-5MiB", "negative");
  expect_error("MiB", "does not start with a number");
  expect_error(".5GiB", "does not start with a number");
  expect_error("5.GiB", "nothing follows the '.'");
  expect_error("12 MiBs", "'MiBs' is not a unit");
  expect_error("12 bytes", "'bytes' is not a unit");
  expect_error("1.5", "must be whole");
  expect_error("1.5B", "must be whole");
  expect_error("18446744073709551616", "too large");
  expect_error("16777216TiB", "too large");
  expect_error("1e9", "'e9' is not a unit");
}

TEST(ParseBytes, BareLetterIsAmbiguousAndOffersBoth) {
  try {
    parse_bytes("8G");
    FAIL() << "8G was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "'8G' is ambiguous: write 8GiB for powers of 1024 or 8GB for powers "
                           "of 1000.");
  }
}

TEST(FormatBytes, PicksUnitWithOneDecimal) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(64ULL << 20), "64.0 MiB");
  EXPECT_EQ(format_bytes(63126118), "60.2 MiB");
  EXPECT_EQ(format_bytes(3ULL << 30), "3.0 GiB");
  EXPECT_EQ(format_bytes(UINT64_MAX), "16.0 EiB");
}

TEST(FormatBytes, NeverPrints1024OfAUnit) {
  EXPECT_EQ(format_bytes((1ULL << 20) - 1), "1.0 MiB");
  EXPECT_EQ(format_bytes((1ULL << 20) - 60), "1023.9 KiB");
  EXPECT_EQ(format_bytes((1ULL << 20) - 1024 * 60), "964.0 KiB");
}

TEST(FormatBytes, RoundTripsThroughParseForWholeUnits) {
  for (uint64_t n : {1ULL << 10, 5ULL << 20, 7ULL << 30}) {
    std::string s = format_bytes(n);
    s.erase(s.find(' '), 1);
    EXPECT_EQ(parse_bytes(s), n) << s;
  }
}

}  // namespace
}  // namespace tandem::memory
