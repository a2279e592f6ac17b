// Durable file operations for checkpoints: whole-file reads and writes that are on disk (fsync)
// when they return, atomic replacement, and the CRC-32 recorded for every shard.
//
// Every function throws tandem::Error naming the path and the system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::checkpoint {

std::vector<char> read_file(const std::string& path);

// Writes `size` bytes as `path` through tandem's output writer (a temporary file beside it,
// flushed to disk, closed and renamed over it; a path that is not a regular file is refused).
void write_file_durable(const std::string& path, const void* data, size_t size);
inline void write_file_durable(const std::string& path, const std::string& text) {
  write_file_durable(path, text.data(), text.size());
}

// Makes the entries (creations, renames, removals) of folder `dir` durable.
void fsync_directory(const std::string& dir);

// Moves folder `from` to `to` in one step; `to` may already exist (it is replaced, and is never
// missing at any moment where the platform can swap two names atomically). Both must be on one
// file system. The parent folder is fsynced afterwards.
void replace_directory(const std::string& from, const std::string& to);

// zlib's CRC-32 (the one of gzip and PNG) of `size` bytes.
uint32_t crc32(const void* data, size_t size);
std::string crc32_hex(uint32_t crc);  // "0x1a2b3c4d"

}  // namespace tandem::checkpoint
