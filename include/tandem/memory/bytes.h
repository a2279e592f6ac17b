// Byte counts as people write them on a command line and read them in a message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::memory {

// Parses "1000000", "512MiB", "2 GiB", "1.5GB", "64kib". Units (case-insensitive):
//   B; KB MB GB TB (powers of 1000); KiB MiB GiB TiB (powers of 1024).
// A bare K/M/G/T is refused as ambiguous, with both readings offered. A fraction is allowed
// with a unit larger than a byte and rounds to the nearest byte.
// Throws tandem::Error naming the text, what is wrong and an example of what works.
uint64_t parse_bytes(std::string_view text);

// Human form with binary units and one decimal: "0 B", "512 B", "1.0 KiB", "60.2 MiB".
// Meant for messages; parse_bytes(format_bytes(n)) is only approximately n.
std::string format_bytes(uint64_t bytes);

}  // namespace tandem::memory
