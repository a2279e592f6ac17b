// Whole-file byte I/O for the data loaders, with transparent gzip.
//
// A file is gzip when it starts with the gzip magic bytes 1f 8b, whatever its name says;
// otherwise its bytes are returned as they are. Every failure throws tandem::Error naming
// the path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data {

// The bytes of `path`, decompressed when the file is gzip. Throws when the file is missing
// or unreadable, or when a gzip stream is corrupt or truncated.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// The first `max_bytes` bytes of `path` (fewer if it is shorter), decompressed when the file is
// gzip; only as much of the file is read as that takes.
std::vector<uint8_t> read_file_prefix(const std::string& path, size_t max_bytes);

// True when `path` exists and starts with the gzip magic bytes.
bool is_gzip_file(const std::string& path);

// Writes `bytes` to `path`, gzip-compressed when `gzip` is true. Overwrites.
void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip);

}  // namespace tandem::data
