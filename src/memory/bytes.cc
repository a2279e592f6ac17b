#include "tandem/memory/bytes.h"

#include <array>
#include <cctype>

#include "tandem/common/check.h"

namespace tandem::memory {
namespace {

struct Unit {
  std::string_view name;
  uint64_t multiplier;
};

constexpr uint64_t kKi = 1024;
constexpr std::array<Unit, 10> kUnits = {{
    {"b", 1},
    {"kb", 1000},
    {"mb", 1000 * 1000},
    {"gb", 1000ULL * 1000 * 1000},
    {"tb", 1000ULL * 1000 * 1000 * 1000},
    {"kib", kKi},
    {"mib", kKi * kKi},
    {"gib", kKi * kKi * kKi},
    {"tib", kKi * kKi * kKi * kKi},
    {"", 1},
}};

constexpr std::string_view kHow =
    "write a whole number of bytes or a number with a unit, e.g. 1000000, 512MiB, 2GiB or 1.5GB "
    "(units: B, KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024)";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

uint64_t parse_bytes(std::string_view text) {
  const std::string_view s = trim(text);
  TANDEM_CHECK(!s.empty(), "'{}' is not a byte count: it is empty; {}.", text, kHow);
  TANDEM_CHECK(s.front() != '-', "'{}' is not a byte count: it is negative; {}.", text, kHow);

  // Number: digits, optionally '.' and more digits.
  size_t i = 0;
  uint64_t whole = 0;
  size_t whole_digits = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, ++whole_digits) {
    const uint64_t digit = static_cast<uint64_t>(s[i] - '0');
    TANDEM_CHECK(!__builtin_mul_overflow(whole, 10, &whole) &&
                     !__builtin_add_overflow(whole, digit, &whole),
                 "'{}' is too large a byte count (the limit is 16 EiB); {}.", text, kHow);
  }
  // Fraction digits beyond 18 cannot change the byte count of any unit up to TiB by more than
  // one byte, so they are checked but not used; this keeps the arithmetic in 128 bits.
  uint64_t fraction = 0;
  uint64_t fraction_scale = 1;
  size_t fraction_digits = 0;
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
      if (++fraction_digits <= 18) {
        fraction = fraction * 10 + static_cast<uint64_t>(s[i] - '0');
        fraction_scale *= 10;
      }
    }
    TANDEM_CHECK(fraction_digits > 0, "'{}' is not a byte count: nothing follows the '.'; {}.",
                 text, kHow);
  }
  TANDEM_CHECK(whole_digits > 0, "'{}' is not a byte count: it does not start with a number; {}.",
               text, kHow);

  const std::string_view unit_text = trim(s.substr(i));
  const std::string unit = lower(unit_text);
  if (unit == "k" || unit == "m" || unit == "g" || unit == "t") {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0])));
    throw Error(fmt::format(
        "'{}' is ambiguous: write {}{}iB for powers of 1024 or {}{}B for powers of 1000.", text,
        s.substr(0, i), u, s.substr(0, i), u));
  }
  const Unit* found = nullptr;
  for (const Unit& u : kUnits) {
    if (u.name == unit) found = &u;
  }
  TANDEM_CHECK(found != nullptr, "'{}' is not a byte count: '{}' is not a unit; {}.", text,
               unit_text, kHow);
  TANDEM_CHECK(fraction == 0 || found->multiplier > 1,
               "'{}' is not a byte count: a number of bytes must be whole; {}.", text, kHow);

  uint64_t bytes = 0;
  TANDEM_CHECK(!__builtin_mul_overflow(whole, found->multiplier, &bytes),
               "'{}' is too large a byte count (the limit is 16 EiB); {}.", text, kHow);
  const unsigned __int128 part =
      (static_cast<unsigned __int128>(fraction) * found->multiplier + fraction_scale / 2) /
      fraction_scale;
  TANDEM_CHECK(!__builtin_add_overflow(bytes, static_cast<uint64_t>(part), &bytes),
               "'{}' is too large a byte count (the limit is 16 EiB); {}.", text, kHow);
  return bytes;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < kKi) return fmt::format("{} B", bytes);
  static constexpr std::array<std::string_view, 6> kNames = {"KiB", "MiB", "GiB", "TiB", "PiB",
                                                             "EiB"};
  double value = static_cast<double>(bytes) / kKi;
  size_t unit = 0;
  // Move up while the value would print as 1024.0 or more in this unit.
  while (value >= kKi - 0.05 && unit + 1 < kNames.size()) {
    value /= kKi;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kNames[unit]);
}

}  // namespace tandem::memory
